# Modelled on ashawkey/torch-ngp#60 (https://github.com/ashawkey/torch-ngp/issues/60): learnable
# offsets added to the sample points "will not optimize after the backpropagation and step ...
# there is detach() function in the code". Here a sampler class shifts the points by an
# nn.Parameter of its own (not a module's) and detaches them, so the offsets never receive a
# gradient while the field, stepped by its own optimizer, learns. Fixed twin: no detach.
import torch
import torch.nn.functional as F
from torch import nn


class PointSampler:
    def __init__(self, n):
        self.base = torch.rand(n, 3)
        self.offsets = nn.Parameter(torch.zeros(n, 3))

    def __call__(self, idx):
        return self.base[idx] + self.offsets[idx]


torch.manual_seed(0)
sampler = PointSampler(256)
target = torch.sin(3 * sampler.base).sum(1, keepdim=True)
field = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 1))
field_opt = torch.optim.Adam(field.parameters(), lr=1e-3)
offset_opt = torch.optim.Adam([sampler.offsets], lr=1e-2)
for it in range(12):
    idx = torch.randint(0, 256, (64,))
    loss = F.mse_loss(field(sampler(idx)), target[idx])
    field_opt.zero_grad()
    offset_opt.zero_grad()
    loss.backward()
    field_opt.step()
    offset_opt.step()
