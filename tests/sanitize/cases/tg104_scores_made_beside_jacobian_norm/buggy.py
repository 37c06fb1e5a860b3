# Report: https://github.com/pytorch/pytorch/issues/69217
# Modelled on pytorch/pytorch#69217 (a validation under torch.no_grad() that also needs
# torch.autograd.grad for a Jacobian norm, so grad is re-enabled for it). The re-enabling is
# needed; but here the validator also computes its sigmoid scores inside the same enable_grad
# block, so every batch's scores leave it carrying a graph that nothing differentiates. The line
# to change is the one making the scores, not the enable_grad the gradient needs.
import torch
from torch import nn

torch.manual_seed(1)


class JacobianValidator:
    """Validation scores plus the input-Jacobian norm of each sample (a smoothness measure)."""

    def __init__(self, model):
        self.model = model

    def batch(self, x):
        with torch.enable_grad():
            x = x.clone().requires_grad_(True)
            out = self.model(x)
            jac, = torch.autograd.grad(out.sum(), x)
            scores = torch.sigmoid(out)  # expect: TG104
        return scores, jac.norm(dim=1)

    @torch.no_grad()
    def run(self, xs):
        return [self.batch(x) for x in xs]


model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(128, 4), torch.rand(128, 1)
for step in range(5):
    loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
results = JacobianValidator(model).run(list(torch.randn(96, 4).split(32)))
print(f"mean score {torch.cat([s for s, _ in results]).mean().item():.3f}")
