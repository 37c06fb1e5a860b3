# Modelled on GitHub deepinv/deepinv#548
# (https://github.com/deepinv/deepinv/issues/548): a reconstruction routine that runs under
# torch.no_grad() turns grad back on with torch.enable_grad() to take the gradient of a
# data-fidelity term, and the value it returns still carries the autograd graph; fed back into
# the next iteration, every iterate keeps the graphs of all earlier ones alive.
import torch

torch.manual_seed(0)


class Deblurrer:
    """Gradient descent on ||A x - y||^2 with a fixed blur matrix A (no trainable weights)."""

    def __init__(self, blur: torch.Tensor, step_size: float = 0.2) -> None:
        self.blur, self.step_size = blur, step_size

    def descend(self, estimate: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            estimate = estimate.clone().requires_grad_(True)
            residual = estimate @ self.blur.T - observed
            (grad,) = torch.autograd.grad(residual.pow(2).sum(), estimate)
        # the update runs under the caller's no_grad: the iterate carries no graph
        refined = estimate.detach() - self.step_size * grad
        return refined.clamp(0.0, 1.0)

    def solve(self, observed: torch.Tensor, iterations: int = 25) -> torch.Tensor:
        with torch.no_grad():
            estimate = torch.zeros_like(observed)
            for _ in range(iterations):
                estimate = self.descend(estimate, observed)
        return estimate


blur = torch.eye(16) * 0.6 + torch.diag(torch.full((15,), 0.2), 1) + \
    torch.diag(torch.full((15,), 0.2), -1)
sharp = torch.rand(4, 16)
restored = Deblurrer(blur).solve(sharp @ blur.T)
print(f"reconstruction error {(restored - sharp).abs().mean().item():.4f}")
