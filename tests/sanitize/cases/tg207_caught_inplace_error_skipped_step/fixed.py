# Modelled on GitHub XuezheMax/wolf#1 (https://github.com/XuezheMax/wolf/pull/1), as a training loop
# that guards each step with `try/except RuntimeError` and skips failing batches: the coupling
# layer's in-place `log_scale.tanh_()` on a view of the saved Tanh output makes every backward
# fail, the loop skips every step, and the run ends "normally" having trained nothing.
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
        scale = log_scale.tanh() + 1.0
        return torch.cat([x1, (x2 + shift) * scale], -1), scale.log().sum(-1)


flow = Coupling()
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
skipped = 0
for step in range(4):
    y, logdet = flow(torch.randn(32, 4))
    loss = (0.5 * y.pow(2).sum(-1) - logdet).mean()
    optimizer.zero_grad()
    try:
        loss.backward()
    except RuntimeError:
        skipped += 1
        continue
    optimizer.step()
print(f"skipped {skipped} of 4 steps")
