# Fixed twin of buggy.py (https://github.com/zhunzhong07/HHL/issues/8): the embedding head has a
# parameter group of its own.
import torch
from torch import nn


class ReID(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.neck = nn.Linear(32, 16)
        self.embed = nn.Linear(16, 8)

    def forward(self, x):
        return self.embed(self.neck(self.backbone(x)))


def make_optimizer(model, lr=0.05):
    options = dict(
        params=[
            {"params": model.backbone.parameters(), "lr": lr * 0.1},
            {"params": model.neck.parameters(), "weight_decay": 5e-4},
            {"params": model.embed.parameters()},
        ],
        lr=lr,
        momentum=0.9,
    )
    return torch.optim.SGD(**options)


torch.manual_seed(0)
model = ReID()
optimizer = make_optimizer(model)
for step in range(4):
    x, target = torch.randn(8, 16), torch.randn(8, 8)
    loss = nn.functional.mse_loss(model(x), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
