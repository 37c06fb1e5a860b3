# Modelled on GitHub HomebrewML/HeavyBall#10 (https://github.com/HomebrewML/HeavyBall/issues/10):
# a hand-written optimizer decorates `step` with @torch.no_grad() and calls the user's closure
# there directly, so the closure's forward builds no graph and its backward raises "element 0
# of tensors does not require grad". The backward in the closure is not the line to change: the
# optimizer's call of the closure is, under `with torch.enable_grad():` as torch.optim does it.
# Here a normalised-gradient optimizer fits a cubic to noisy samples, the closure written
# inline in a top-level loop. Fixed twin: the closure call runs under torch.enable_grad().
import torch
import torch.nn.functional as F


class NormalizedSGD(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 0.05) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure()  # expect: TG204
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad / (p.grad.norm() + 1e-8), alpha=-group["lr"])
        return loss


torch.manual_seed(11)
xs = torch.linspace(-1, 1, 64).unsqueeze(1)
ys = 0.5 * xs ** 3 - xs + 0.05 * torch.randn_like(xs)
coeffs = torch.zeros(4, requires_grad=True)
opt = NormalizedSGD([coeffs])
powers = torch.cat([xs ** k for k in range(4)], dim=1)
for it in range(20):
    def closure():
        opt.zero_grad()
        err = F.mse_loss(powers @ coeffs, ys.squeeze(1))
        err.backward()
        return err
    opt.step(closure)
