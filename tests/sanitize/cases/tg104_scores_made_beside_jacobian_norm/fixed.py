# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/issues/69217): only the Jacobian is
# taken inside the enable_grad block; the scores are computed after it, under no_grad.
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
        scores = torch.sigmoid(out)
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
