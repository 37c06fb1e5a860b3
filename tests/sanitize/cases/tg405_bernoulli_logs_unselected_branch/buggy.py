# Modelled on pytorch/pytorch#52248 (https://github.com/pytorch/pytorch/issues/52248), "torch.where
# leads to unexpected gradients ... The not-used branch computes gradient 0/0 and that becomes
# NaN". A click model's negative log-likelihood picks log(p) for clicks and log(1 - p) for the
# rest with torch.where. Once a click's sigmoid rounds to exactly 1.0, log(1 - p) is -inf in the
# branch where() leaves out: the loss stays finite, its gradient is NaN, the step writes NaN into
# the weights, and the next loss is NaN. Nothing keeps p off 0 and 1.
import torch
from torch import nn


def bernoulli_nll(p, clicked):
    log_p = p.log()  # expect: TG405
    log_q = (1 - p).log()
    return -torch.where(clicked, log_p, log_q).mean()


torch.manual_seed(0)
features = torch.randn(512, 8)
clicked = features[:, 0] + 0.5 * features[:, 1] > 0
ranker = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(ranker.parameters(), lr=2.0)
for epoch in range(20):
    for i in range(0, 512, 64):
        p = torch.sigmoid(ranker(features[i:i + 64])).squeeze(-1)
        loss = bernoulli_nll(p, clicked[i:i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()
