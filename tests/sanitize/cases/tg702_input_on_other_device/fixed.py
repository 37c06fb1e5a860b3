# Fixed twin of buggy.py (https://github.com/Comfy-Org/ComfyUI/issues/2363): the batch is moved to
# the model's device.
import torch
from torch import nn

torch.manual_seed(18)
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).to("meta")
batch = torch.randn(5, 3).to("meta")
prediction = model(batch)
print(prediction.shape)
