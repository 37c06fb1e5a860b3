# Report: https://github.com/ylsung/pytorch-adversarial-training/issues/3
# Near miss for TG302, modelled on that question (does the step also use the gradients left by the
# loss that crafted the perturbation? No: they are cleared first): a sensor classifier crafts
# adversarial inputs from the input gradient right after the previous step, before zeroing, so
# that backward also lands on the weights; the zero_grad that follows clears them on purpose.
# Every few steps a probe backpropagates a held-out batch after the step to log gradient norms
# and clears them itself. Neither backward is meant for a step: nothing to report.
import torch
import torch.nn.functional as F
from torch import nn


def perturb(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.clone().requires_grad_(True)
    F.cross_entropy(model(x), y).backward()
    return (x + eps * x.grad.sign()).detach()


def grad_norm_probe(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    F.cross_entropy(model(x), y).backward()
    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
    model.zero_grad()
    return float(norm)


torch.manual_seed(5)
features = torch.randn(640, 12)
labels = (features[:, :3].sum(dim=1) > 0).long() + (features[:, 3] > 1).long()
held_x, held_y = features[:64], labels[:64]
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
norms = []
for step, start in enumerate(range(64, 640, 32)):
    x, y = features[start:start + 32], labels[start:start + 32]
    x_adv = perturb(model, x, y, eps=0.05)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(torch.cat([x, x_adv])), torch.cat([y, y]))
    loss.backward()
    optimizer.step()
    if step % 4 == 0:
        norms.append(grad_norm_probe(model, held_x, held_y))
print(f"loss {loss.item():.3f}, probe norms {[round(n, 3) for n in norms]}")
