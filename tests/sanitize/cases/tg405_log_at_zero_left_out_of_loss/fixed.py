# Modelled on pytorch/pytorch#4132 (https://github.com/pytorch/pytorch/issues/4132), "x.grad
# should be 0 but get NaN after x/0": an inf that the loss leaves out still reaches the gradient
# (0 * inf is NaN), and on pytorch/pytorch#31829 on the same for log at 0. A trainer learns from
# complementary labels ("not this class") with -log(1 - p): once a probability is exactly 1, the
# log of 0 is -inf in entries nll_loss does not pick, the loss stays finite, the gradient is NaN,
# and the next loss is NaN. The log's input needs keeping off 0.
import torch
import torch.nn.functional as F
from torch import nn


class ComplementaryTrainer:
    def __init__(self, net, lr):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=lr)

    def get_loss(self, x, not_label):
        probs = F.softmax(self.net(x), dim=1)
        return F.nll_loss(torch.log((1 - probs).clamp_min(1e-12)), not_label)

    def step(self, x, not_label):
        self.opt.zero_grad()
        loss = self.get_loss(x, not_label)
        loss.backward()
        self.opt.step()
        return loss.item()


torch.manual_seed(0)
centers = torch.randn(3, 6) * 3
trainer = ComplementaryTrainer(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)), 2.0)
for it in range(100):
    y = torch.randint(0, 3, (32,))
    x = centers[y] + torch.randn(32, 6)
    not_label = (y + torch.randint(1, 3, (32,))) % 3
    loss = trainer.step(x, not_label)
