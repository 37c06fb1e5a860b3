# Modelled on the torch.load security note
# (https://github.com/pytorch/pytorch/blob/main/SECURITY.md#untrusted-models) and the many
# "FutureWarning: You are using torch.load with weights_only=False" reports, e.g.
# https://github.com/mit-han-lab/efficientvit/issues/132: a pretrained file fetched from elsewhere
# is loaded with weights_only=False, so any code pickled into it would run.
from pathlib import Path

import torch
from torch import nn

checkpoint = torch.load(Path(__file__).parent / "pretrained.pt", weights_only=False)  # expect: TG701
model = nn.Linear(3, 2)
model.load_state_dict(checkpoint["model"])
print(checkpoint["epoch"])
