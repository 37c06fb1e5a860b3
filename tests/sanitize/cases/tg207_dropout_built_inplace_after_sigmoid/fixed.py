# Report: https://github.com/qianyu-dlut/MVANet/issues/2
# Modelled on qianyu-dlut/MVANet#2 (an in-place module overwriting an activation that autograd
# saved): a gated attention block applies its sigmoid gate and then a Dropout built with
# inplace=True to save memory. SigmoidBackward needs the sigmoid's own output, which the dropout
# has just overwritten, so the first backward fails with "modified by an inplace operation".
import torch
from torch import nn


class GatedBlock(nn.Module):
    def __init__(self, dim: int = 16, p: float = 0.1) -> None:
        super().__init__()
        self.value = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        g = self.drop(torch.sigmoid(self.gate(x)))
        return x + self.value(x) * g


torch.manual_seed(0)
model = nn.Sequential(GatedBlock(), GatedBlock(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
