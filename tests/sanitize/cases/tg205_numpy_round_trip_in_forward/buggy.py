# Modelled on GitHub delira-dev/delira#40 (https://github.com/delira-dev/delira/issues/40): a part
# of the forward goes through numpy and back, which autograd cannot follow, so the layer in front
# of the round trip never receives a gradient although the optimizer holds it.
import numpy as np
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 16), nn.ReLU())
        self.gate = nn.Linear(16, 1)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        gate = torch.from_numpy(np.tanh(self.gate(h).detach().numpy()))  # expect: TG205
        return self.head(h) * (1 + gate)


class Trainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(5)
trainer = Trainer(Scorer())
for i in range(6):
    x = torch.randn(16, 5)
    trainer.step(x, x.sum(1, keepdim=True))
