# Report: https://github.com/NVIDIA/DeepLearningExamples/issues/1102
# Modelled on NVIDIA/DeepLearningExamples#1102 (host memory of BERT pretraining grows every step):
# a statistics registry keeps one running sum per name and its stat objects add whatever they are
# given, so handing it the loss tensors chains every step's graph. Here a masked-token model is
# trained at a notebook's top level and a reporting helper hands the registry both losses; the
# registry only passes its argument on, so the helper's call is the one to change (.item()).
import torch
import torch.nn.functional as F
from torch import nn


class RunningStat:
    def __init__(self) -> None:
        self.total, self.seen = 0.0, 0

    def add(self, value, n: int = 1) -> None:
        self.total += value * n
        self.seen += n


class StatsRegistry:
    def __init__(self) -> None:
        self.stats: dict[str, RunningStat] = {}

    def log(self, named: dict, n: int = 1) -> None:
        for key, value in named.items():
            self.stats.setdefault(key, RunningStat()).add(value, n)


def report(registry, token_loss, order_loss, n):
    registry.log({"tokens": token_loss.item(), "order": order_loss.item()}, n)


torch.manual_seed(3)
embed = nn.Embedding(50, 16)
token_head, order_head = nn.Linear(16, 50), nn.Linear(16, 2)
params = [*embed.parameters(), *token_head.parameters(), *order_head.parameters()]
opt = torch.optim.Adam(params, lr=1e-2)
stats = StatsRegistry()
for step in range(10):
    ids = torch.randint(0, 50, (8, 12))
    hidden = embed(ids)
    token_loss = F.cross_entropy(token_head(hidden).flatten(0, 1), ids.flatten())
    order_loss = F.cross_entropy(order_head(hidden.mean(1)), (ids[:, 0] > ids[:, -1]).long())
    opt.zero_grad()
    (token_loss + order_loss).backward()
    opt.step()
    report(stats, token_loss, order_loss, ids.shape[0])
print({key: float(s.total) / s.seen for key, s in stats.stats.items()})
