# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/blob/main/SECURITY.md#untrusted-models):
# the file is loaded with weights_only=True (also torch's default from 2.6), which unpickles only
# tensors and plain containers.
from pathlib import Path

import torch
from torch import nn

checkpoint = torch.load(Path(__file__).parent / "pretrained.pt", weights_only=True)
same = torch.load(Path(__file__).parent / "pretrained.pt")
model = nn.Linear(3, 2)
model.load_state_dict(checkpoint["model"])
print(checkpoint["epoch"], same["epoch"])
