# Modelled on GitHub OpenNMT/OpenNMT-py#1141 (https://github.com/OpenNMT/OpenNMT-py/issues/1141):
# a trainer's validation routine switches the model to eval mode but never turns grad off, so each
# validation batch records a graph that nothing backpropagates. Here a ranking callback run at the
# end of every epoch is such a routine: it is all evaluation, so `@torch.no_grad()` belongs on its
# `def`. The fit loop below also validates inline, inside the function that trains: that forward
# is reported at its own line, where a `with torch.no_grad():` goes, and so is the forward that
# held_out_rmse() left just outside the `torch.no_grad()` block it already has.
import torch
from torch import nn

torch.manual_seed(5)
USERS, ITEMS, DIM = 24, 30, 8


class Factorizer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.users = nn.Embedding(USERS, DIM)
        self.items = nn.Embedding(ITEMS, DIM)
        self.drop = nn.Dropout(0.2)

    def forward(self, u: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return (self.drop(self.users(u)) * self.items(i)).sum(-1)


class HitRateCallback:
    def __init__(self, pairs: torch.Tensor) -> None:
        self.pairs, self.history = pairs, []

    @torch.no_grad()
    def on_epoch_end(self, model: nn.Module) -> None:
        model.eval()
        every_item = torch.arange(ITEMS)
        hits = 0
        for u, held_out in self.pairs.tolist():
            scores = model(torch.full((ITEMS,), u), every_item)
            hits += int(held_out in scores.topk(5).indices.tolist())
        self.history.append(hits / len(self.pairs))


def held_out_rmse(model: nn.Module, ratings: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        users, items = ratings[:, 0].long(), ratings[:, 1].long()
        pred = model(users, items)
    return (pred - ratings[:, 2]).pow(2).mean().sqrt().item()


def fit(model: nn.Module, ratings: torch.Tensor, callback: HitRateCallback) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    u, i, r = ratings[:, 0].long(), ratings[:, 1].long(), ratings[:, 2]
    for epoch in range(3):
        model.train()
        opt.zero_grad()
        nn.functional.mse_loss(model(u[:96], i[:96]), r[:96]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            held = nn.functional.mse_loss(model(u[96:], i[96:]), r[96:])
        callback.on_epoch_end(model)
    return held.item()


ratings = torch.stack([torch.randint(0, USERS, (128,)).float(),
                       torch.randint(0, ITEMS, (128,)).float(), torch.rand(128) * 5], dim=1)
callback = HitRateCallback(torch.stack([torch.arange(8), torch.randint(0, ITEMS, (8,))], dim=1))
model = Factorizer()
print(fit(model, ratings, callback), callback.history, held_out_rmse(model, ratings[96:]))
