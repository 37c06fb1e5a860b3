# Modelled on castorini/hedwig#18 (https://github.com/castorini/hedwig/issues/18): moving
# self.model.train() out of the epoch loop "because it runs every epoch" was closed as invalid,
# since each epoch's evaluation leaves the model in eval mode. Here a trainer class does exactly
# that: fit() calls self.model.train() once, before its `while` epoch loop, and validate() calls
# self.model.eval(), so from the second epoch on a node classifier trains with BatchNorm frozen
# and Dropout off. The train() that runs once is the line to move into the loop.
import torch
from torch import nn
import torch.nn.functional as F


class NodeClassifier(nn.Module):
    """Two rounds of mean aggregation over a dense adjacency matrix, then a linear head."""

    def __init__(self, features: int = 6, hidden: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.lin1 = nn.Linear(features, hidden)
        self.norm = nn.BatchNorm1d(hidden)
        self.lin2 = nn.Linear(hidden, classes)
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm(adj @ self.lin1(x)))
        return adj @ self.lin2(self.drop(h))


class Trainer:
    def __init__(self, model: nn.Module, graph: tuple, max_epochs: int = 3) -> None:
        self.model, self.graph, self.max_epochs = model, graph, max_epochs
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        self.epoch = 0

    def validate(self) -> float:
        x, adj, y, _, val = self.graph
        self.model.eval()
        with torch.no_grad():
            return (self.model(x, adj)[val].argmax(1) == y[val]).float().mean().item()

    def fit(self) -> None:
        x, adj, y, train, _ = self.graph
        self.model.train()
        while self.epoch < self.max_epochs:  # expect: TG102
            for mask in train.chunk(2):
                self.optimizer.zero_grad()
                loss = F.cross_entropy(self.model(x, adj)[mask], y[mask])
                loss.backward()
                self.optimizer.step()
            self.epoch += 1
            print(self.epoch, self.validate())


torch.manual_seed(0)
n = 30
adj = (torch.rand(n, n) < 0.2).float() + torch.eye(n)
adj = adj / adj.sum(1, keepdim=True)
order = torch.randperm(n)
graph = (torch.randn(n, 6), adj, torch.randint(0, 3, (n,)), order[:20], order[20:])
Trainer(NodeClassifier(), graph).fit()
