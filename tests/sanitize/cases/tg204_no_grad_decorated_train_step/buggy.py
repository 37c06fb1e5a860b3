# Modelled on rasbt/faster-pytorch-blog#8
# (https://github.com/rasbt/faster-pytorch-blog/issues/8): a grad-disabling context placed on a
# training step function, where the model still has to backpropagate. Here the step is a method
# decorated with @torch.no_grad() (meant for the evaluation next to it), so the loss has no graph
# and backward dies with "element 0 of tensors does not require grad". The decorator is the line
# to change, not the backward.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Learner:
    def __init__(self, net: nn.Module) -> None:
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    @torch.no_grad()  # expect: TG204
    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.net.train()
        loss = F.cross_entropy(self.net(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    @torch.no_grad()
    def accuracy(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.net.eval()
        return (self.net(x).argmax(1) == y).float().mean().item()


learner = Learner(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4)))
x, y = torch.randn(64, 12), torch.randint(0, 4, (64,))
for epoch in range(3):
    print(f"epoch {epoch}: loss {learner.train_step(x, y):.3f}, acc {learner.accuracy(x, y):.3f}")
