# Modelled on the forum thread "How to debug causes of GPU memory leaks?"
# (https://discuss.pytorch.org/t/how-to-debug-causes-of-gpu-memory-leaks/6741), where tensors kept
# in Python containers hold their autograd graphs:
# the per-step losses are kept as tensors for a plot at the end, each with its graph.
import torch
import torch.nn.functional as F
from torch import nn


class TwoHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.cls = nn.Linear(16, 3)
        self.reg = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.cls(h), self.reg(h)


def train(steps: int = 8) -> list:
    torch.manual_seed(1)
    model = TwoHead()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    history = []
    for step in range(steps):
        x = torch.randn(12, 8)
        labels, values = torch.randint(0, 3, (12,)), torch.randn(12, 1)
        logits, pred = model(x)
        loss = F.cross_entropy(logits, labels) + F.mse_loss(pred, values)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        history.append(loss)  # expect: TG201
    return history


if __name__ == "__main__":
    print([round(v.item(), 3) for v in train()])
