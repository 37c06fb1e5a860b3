# Modelled on GitHub ultralytics/ultralytics#2855
# (https://github.com/ultralytics/ultralytics/pull/2855, "build_optimizer() assign all
# parameters"): the optimizer's parameter groups were filled by a loop over the model's modules
# that picked biases, norm weights and other weights by attribute, so a parameter of another name
# (here a learned per-channel scale) matched no branch and was never given to the optimizer: it
# receives gradients and never changes. The line to change is the loop's last branch, after which
# a default one belongs.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(4)


class ScaledConv(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.scale = nn.Parameter(torch.ones(1, c_out, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.bn(self.conv(x))) * self.scale


def build_optimizer(model: nn.Module, lr: float = 0.01) -> torch.optim.Optimizer:
    norm_weights, weights, biases = [], [], []
    for module in model.modules():
        if isinstance(getattr(module, "bias", None), nn.Parameter):
            biases.append(module.bias)
        if isinstance(module, nn.BatchNorm2d):
            norm_weights.append(module.weight)
        elif isinstance(getattr(module, "weight", None), nn.Parameter):
            weights.append(module.weight)  # expect: TG304
    return torch.optim.SGD([
        {"params": norm_weights},
        {"params": weights, "weight_decay": 5e-4},
        {"params": biases},
    ], lr=lr, momentum=0.9)


model = nn.Sequential(ScaledConv(3, 8), ScaledConv(8, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 4))
optimizer = build_optimizer(model)
x, y = torch.randn(16, 3, 12, 12), torch.randint(0, 4, (16,))
for step in range(12):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
