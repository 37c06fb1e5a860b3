# Fixed twin of buggy.py (https://discuss.pytorch.org/t/expected-all-tensors-to-be-on-the-same-device-but-found-at-least-two-devices-cuda-0-and-cpu-error/151314):
# the batch is moved to the model's device.
import torch
from torch import nn

device = torch.device("meta")
torch.manual_seed(14)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
x = torch.randn(4, 5).to(device)
out = model(x)
print(out.shape, out.device)
