# Report: https://github.com/locuslab/fast_adversarial/issues/14
# A robustness evaluation between training epochs, in the style of PGD adversarial evaluation
# (Madry et al. 2018, https://arxiv.org/abs/1706.06083; locuslab/fast_adversarial#14 discusses
# putting the model in eval mode for the attack). The evaluator calls model.eval() and runs a
# projected-gradient attack that takes the input's gradient with torch.autograd.grad inside
# torch.enable_grad(): that backward reaches the eval-mode forward's output but never touches the
# parameters' .grad. The fault is elsewhere: model.train() runs once, before the epoch loop, so
# every epoch after the first evaluation trains in eval mode (BatchNorm frozen, Dropout off).
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Dropout(0.2))
        self.head = nn.Linear(8 * 4 * 4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).flatten(1))


class Attack:
    """L-infinity projected gradient ascent on the input; gradients of the input only."""

    def __init__(self, model: nn.Module, eps: float = 0.1, alpha: float = 0.03,
                 steps: int = 3) -> None:
        self.model, self.eps, self.alpha, self.steps = model, eps, alpha, steps

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        delta = torch.zeros_like(x)
        for _ in range(self.steps):
            with torch.enable_grad():
                delta.requires_grad_(True)
                loss = F.cross_entropy(self.model(x + delta), y)
                (grad,) = torch.autograd.grad(loss, [delta])
            delta = (delta.detach() + self.alpha * grad.sign()).clamp(-self.eps, self.eps)
        return (x + delta).detach()


@torch.no_grad()
def robust_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    x_adv = Attack(model)(x, y)
    return (model(x_adv).argmax(1) == y).float().mean().item()


x_train, y_train = torch.randn(64, 1, 8, 8), torch.randint(0, 4, (64,))
x_val, y_val = torch.randn(16, 1, 8, 8), torch.randint(0, 4, (16,))
model = TinyConvNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model.train()
for epoch in range(3):  # expect: TG102
    for i in range(0, 64, 16):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x_train[i:i + 16]), y_train[i:i + 16])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: robust accuracy {robust_accuracy(model, x_val, y_val):.2f}")
