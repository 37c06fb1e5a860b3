# Report: https://github.com/locuslab/fast_adversarial/issues/14
# Adversarial training with the attack run in eval mode, as suggested in
# locuslab/fast_adversarial#14 (https://github.com/locuslab/fast_adversarial/issues/14) so that
# Dropout noise and batch statistics do not steer the perturbation. The attack calls
# loss.backward() to read delta.grad: that backward reaches an eval-mode forward and puts gradients
# into the parameters' .grad too, but optimizer.zero_grad() discards them before the training
# forward, which runs in training mode. No step ever uses a gradient of an eval-mode forward.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(32, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
features, labels = torch.randn(96, 12), torch.randint(0, 3, (96,))


def fgsm_delta(x: torch.Tensor, y: torch.Tensor, eps: float = 0.05) -> torch.Tensor:
    model.eval()
    delta = torch.zeros_like(x, requires_grad=True)
    F.cross_entropy(model(x + delta), y).backward()
    step = eps * delta.grad.sign()
    model.train()
    return step


for epoch in range(2):
    running = 0.0
    for i in range(0, 96, 24):
        x, y = features[i:i + 24], labels[i:i + 24]
        x_adv = x + fgsm_delta(x, y)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x_adv), y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    print(f"epoch {epoch}: adversarial loss {running / 4:.3f}")
