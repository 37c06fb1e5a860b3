# Report: https://github.com/llSourcell/pytorch_in_5_minutes/issues/1
# Modelled on llSourcell/pytorch_in_5_minutes#1 ("when to call grad.data.zero_()?", zeroing
# placed right after loss.backward()): a node classifier logs per-layer gradient norms in a
# helper called between backward and step, and the helper clears the gradients it just read, so
# the optimizer steps on nothing. The input projection is kept frozen on purpose by zeroing only
# its gradients; the fixed twin zeroes only that projection.
import torch
import torch.nn.functional as F
from torch import nn


class GCN(nn.Module):
    def __init__(self, n_in: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.project = nn.Linear(n_in, hidden)
        self.conv1 = nn.Linear(hidden, hidden)
        self.conv2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.project(x)
        h = F.relu(adj @ self.conv1(h))
        return adj @ self.conv2(h)


def report_gradients(model: GCN, log: list) -> None:
    log.append({name: p.grad.norm().item() for name, p in model.named_parameters()})
    model.zero_grad()


def train(model: GCN, x, adj, labels, epochs: int) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    log: list = []
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, adj), labels)
        loss.backward()
        report_gradients(model, log)  # expect: TG302
        optimizer.step()
    return loss.item()


torch.manual_seed(5)
n = 30
adj = (torch.rand(n, n) < 0.2).float() + torch.eye(n)
adj = adj / adj.sum(dim=1, keepdim=True)
x, labels = torch.randn(n, 8), torch.randint(0, 3, (n,))
print(f"loss {train(GCN(8, 16, 3), x, adj, labels, 5):.3f}")
