# Modelled on GitHub vturrisi/solo-learn#135 (https://github.com/vturrisi/solo-learn/issues/135):
# whether a layer learns depends on where its output is detached. Here the context layer's output
# is used only through a detached gate in the classifier's forward, so the context layer never
# receives a gradient although the optimizer holds it.
import torch
import torch.nn.functional as F
from torch import nn


class GatedClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
        self.context = nn.Linear(4, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        gate = torch.sigmoid(self.context(ctx))
        h = h * gate.detach()  # expect: TG205
        return self.head(h)


def run(steps: int) -> None:
    model = GatedClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x, ctx = torch.randn(32, 10), torch.randn(32, 4)
        y = (x[:, 0] + ctx[:, 0] > 0).long()
        loss = F.cross_entropy(model(x, ctx), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(6)
run(8)
