# Report: https://github.com/benedekrozemberczki/pytorch_geometric_temporal/issues/18
# Modelled on benedekrozemberczki/pytorch_geometric_temporal#18: a recurrent graph cell makes its
# initial hidden state in a helper method with torch.zeros(...) and no device when none is given,
# so the state stays on the CPU after the model and the graph signal were moved to the
# accelerator ("meta" stands in for "cuda" so that the case runs anywhere).
import torch
from torch import nn


class GraphGRUCell(nn.Module):
    def __init__(self, nodes: int, features: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.adj = nn.Parameter(torch.eye(nodes) + 0.1)
        self.update = nn.Linear(features + hidden, hidden)
        self.candidate = nn.Linear(features + hidden, hidden)

    def _set_hidden_state(self, x: torch.Tensor, h: torch.Tensor | None) -> torch.Tensor:
        if h is None:
            h = torch.zeros(x.shape[0], x.shape[1], self.hidden, device=x.device)
        return h

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
        h = self._set_hidden_state(x, h)
        xh = self.adj @ torch.cat([x, h], dim=-1)
        z = torch.sigmoid(self.update(xh))
        return z * h + (1 - z) * torch.tanh(self.candidate(xh))


class Forecaster(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = GraphGRUCell(nodes=10, features=4, hidden=8)
        self.out = nn.Linear(8, 1)

    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        h = None
        for t in range(signal.shape[1]):
            h = self.cell(signal[:, t], h)
        return self.out(h)


device = torch.device("meta")
torch.manual_seed(2)
model = Forecaster().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
signal = torch.randn(3, 5, 10, 4).to(device)
optimizer.zero_grad()
loss = model(signal).pow(2).mean()
loss.backward()
optimizer.step()
