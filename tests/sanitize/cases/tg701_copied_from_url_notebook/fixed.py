# Fixed twin of nikopueringer/CorridorKey#12 (https://github.com/nikopueringer/CorridorKey/issues/12):
# the downloaded checkpoint is loaded with weights_only=True, as the report suggests.
import os
import shutil
import tempfile
import urllib.request

import torch
from torch import nn

# %% download the checkpoint
ckpt_url = "file://" + os.path.join(os.path.dirname(os.path.abspath(__file__)), "vit_tiny.pt")
ckpt_path = os.path.join(tempfile.mkdtemp(), "vit_tiny.pt")
with urllib.request.urlopen(ckpt_url) as src, open(ckpt_path, "wb") as dst:
    shutil.copyfileobj(src, dst)

# %% build the model and load it
net = nn.Linear(3, 2)
ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
net.load_state_dict(ckpt["model"])
print("loaded epoch", ckpt["epoch"])
