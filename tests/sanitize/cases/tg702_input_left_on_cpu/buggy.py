# Modelled on the forum thread and GitHub issue "RuntimeError: Expected all tensors to be on the same device, but
# found at least two devices, cuda:0 and cpu!"
# (https://discuss.pytorch.org/t/expected-all-tensors-to-be-on-the-same-device-but-found-at-least-two-devices-cuda-0-and-cpu-error/151314,
# https://github.com/BenMSK/trajectory_prediction_TraPHic/issues/1):
# the model is moved to the accelerator, the batch is not. The "meta" device stands in for "cuda"
# so that the case runs on any machine; PyTorch raises the same kind of error.
import torch
from torch import nn

device = torch.device("meta")
torch.manual_seed(14)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
x = torch.randn(4, 5)
out = model(x)  # expect: TG702
