# Modelled on GitHub XuezheMax/wolf#1 (https://github.com/XuezheMax/wolf/pull/1): an affine coupling
# layer splits its conditioner's Tanh output into shift and log-scale halves and squashes the
# log-scale with chained in-place calls, `log_scale.mul_(0.5).tanh_()`: the halves are views of the
# output Tanh saved for backward, so backward fails with "modified by an inplace operation".
import torch
from torch import nn

torch.manual_seed(0)


class Coupling(nn.Module):
    def __init__(self, dim: int = 4, hidden: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim // 2, hidden), nn.ReLU(),
                                 nn.Linear(hidden, dim), nn.Tanh())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x1, x2 = x.chunk(2, dim=-1)
        params = self.net(x1)
        shift, log_scale = params[..., :2], params[..., 2:]
        scale = log_scale.mul(0.5).tanh().add(1.0)
        return torch.cat([x1, (x2 + shift) * scale], -1), scale.log().sum(-1)


flow = Coupling()
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
for step in range(3):
    y, logdet = flow(torch.randn(32, 4))
    loss = (0.5 * y.pow(2).sum(-1) - logdet).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
