# Report: https://github.com/davda54/sam/issues/8
# A correct look-alike modelled on the sharpness-aware minimisation loop discussed in
# davda54/sam#8, written by hand in a training function: the first backward gives the ascent
# direction, the parameters are moved to the neighbourhood, the gradients are zeroed and a second
# backward is taken there; the parameters are moved back before the optimizer steps. The zero_grad
# between the two backward calls is the algorithm, not a lost batch (the parameters moved in
# between), and a SAM optimizer that zeroes inside its own first_step is likewise silent.
import torch
import torch.nn.functional as F
from torch import nn


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base, rho: float = 0.05, **kwargs) -> None:
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base = base(self.param_groups, **kwargs)

    @torch.no_grad()
    def first_step(self) -> None:
        for group in self.param_groups:
            norm = torch.norm(torch.stack([p.grad.norm() for p in group["params"]
                                           if p.grad is not None]))
            for p in group["params"]:
                if p.grad is None:
                    continue
                e = p.grad * (group["rho"] / (norm + 1e-12))
                p.add_(e)
                self.state[p]["e"] = e
        self.zero_grad()

    @torch.no_grad()
    def second_step(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if "e" in self.state[p]:
                    p.sub_(self.state[p]["e"])
        self.base.step()
        self.zero_grad()


def train_by_hand(model, optimizer, x, y, rho: float = 0.05) -> float:
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    with torch.no_grad():
        params = [p for p in model.parameters() if p.grad is not None]
        norm = torch.norm(torch.stack([p.grad.norm() for p in params]))
        moved = [p.grad * (rho / (norm + 1e-12)) for p in params]
        for p, e in zip(params, moved):
            p.add_(e)
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    with torch.no_grad():
        for p, e in zip(params, moved):
            p.sub_(e)
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def train_with_class(model, optimizer, x, y) -> float:
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.first_step()
    F.cross_entropy(model(x), y).backward()
    optimizer.second_step()
    return loss.item()


torch.manual_seed(0)
x, y = torch.randn(64, 10), torch.randint(0, 3, (64,))
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for _ in range(6):
    loss = train_by_hand(model, optimizer, x, y)
other = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
sam = SAM(other.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
for _ in range(6):
    loss = train_with_class(other, sam, x, y)
print(f"loss {loss:.3f}")
