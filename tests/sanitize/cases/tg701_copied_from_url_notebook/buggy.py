# Modelled on nikopueringer/CorridorKey#12 (https://github.com/nikopueringer/CorridorKey/issues/12):
# "if a user downloads a malicious .pth checkpoint from any source other than the official
# Hugging Face repo, pickle deserialization can execute arbitrary Python code". Written as notebook
# cells run top to bottom: the checkpoint is streamed to disk with shutil.copyfileobj, then loaded
# with weights_only=False. A file:// URL stands in for the download site. Fixed twin: the script
# loads it with weights_only=True.
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
ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)  # expect: TG701
net.load_state_dict(ckpt["model"])
print("loaded epoch", ckpt["epoch"])
