# Modelled on GitHub Lightning-AI/pytorch-lightning#2427
# (https://github.com/Lightning-AI/pytorch-lightning/issues/2427): a test step measures robustness
# to a one-step (FGSM) attack, which needs the gradient of the loss with respect to the input;
# the trainer runs every test step under torch.no_grad(), so torch.autograd.grad dies with
# "element 0 of tensors does not require grad". The step must turn grad mode back on itself.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Robustness:
    """A tiny trainer: fit() trains, test() runs test_step on every batch under no_grad."""

    def __init__(self, net: nn.Module, eps: float = 0.1) -> None:
        self.net, self.eps = net, eps
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def fit(self, batches: list) -> None:
        self.net.train()
        for x, y in batches:
            self.opt.zero_grad()
            F.cross_entropy(self.net(x), y).backward()
            self.opt.step()

    def test_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        x = x.clone().requires_grad_(True)
        loss = F.cross_entropy(self.net(x), y)
        grad = torch.autograd.grad(loss, x)[0]  # expect: TG204
        adv = (x + self.eps * grad.sign()).detach()
        return (self.net(adv).argmax(1) == y).float().mean().item()

    def test(self, batches: list) -> float:
        self.net.eval()
        with torch.no_grad():
            return sum(self.test_step(x, y) for x, y in batches) / len(batches)


data = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(3)]
runner = Robustness(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3)))
runner.fit(data)
print(f"accuracy under attack: {runner.test(data):.3f}")
