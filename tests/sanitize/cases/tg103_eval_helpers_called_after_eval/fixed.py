# Fixed twin of buggy.py (https://github.com/skorch-dev/skorch/pull/219): the evaluation runs its
# helpers under torch.no_grad().
import torch
import torch.nn.functional as F
from torch import nn


def embed(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return F.normalize(model(x), dim=1)


def nearest_accuracy(model: nn.Module, queries: tuple, gallery: tuple) -> float:
    sims = embed(model, queries[0]) @ gallery[0].t()
    return (gallery[1][sims.argmax(1)] == queries[1]).float().mean().item()


def evaluate(model: nn.Module, queries: tuple, gallery: tuple) -> float:
    model.eval()
    with torch.no_grad():
        gallery_emb = embed(model, gallery[0])
        acc = nearest_accuracy(model, queries, (gallery_emb, gallery[1]))
    model.train()
    return acc


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 12), torch.randint(0, 4, (64,))
    for epoch in range(2):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x)[:, :4], y)
        loss.backward()
        optimizer.step()
        print(epoch, evaluate(model, (x[:16], y[:16]), (x[16:], y[16:])))
