# Report: https://github.com/s-huu/TurningWeaknessIntoStrength/issues/6
# Adversarial-example detection by input gradients: the trained classifier is frozen
# (requires_grad_(False) on every parameter) and put in eval mode; each test image is made to
# require grad and pushed along its gradient's sign until the prediction flips. The forwards
# that only read the prediction (argmax) carry a grad_fn because the input requires grad; the
# model keeps nothing of its own for them, and the attack's forwards are backpropagated.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
for _ in range(10):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
model.eval()
for p in model.parameters():
    p.requires_grad_(False)


def steps_to_flip(sample: torch.Tensor, steps: int = 10, size: float = 0.05) -> int:
    x_var = sample.clone().unsqueeze(0).requires_grad_(True)
    original = model(x_var).argmax(1)
    for k in range(1, steps + 1):
        loss = F.cross_entropy(model(x_var), original)
        grad, = torch.autograd.grad(loss, x_var)
        with torch.no_grad():
            x_var += size * grad.sign()
        if model(x_var).argmax(1).item() != original.item():
            return k
    return steps + 1


print([steps_to_flip(s) for s in torch.randn(5, 16)])
