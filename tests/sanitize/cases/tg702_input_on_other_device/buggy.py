# Modelled on GitHub Comfy-Org/ComfyUI#2363 ("Expected all tensors to be on the same device, but
# found at least two devices, cuda:0 and cpu", https://github.com/Comfy-Org/ComfyUI/issues/2363):
# the model was moved to a device but the batch was not. Written with the "meta" device so that it runs on a machine without a GPU; the
# mismatch is the same kind.
import torch
from torch import nn

torch.manual_seed(18)
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).to("meta")
batch = torch.randn(5, 3)
prediction = model(batch)  # expect: TG702
