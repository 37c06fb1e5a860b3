# Report: https://github.com/ragulpr/wtte-rnn/issues/39
# Modelled on ragulpr/wtte-rnn#39 (a Weibull time-to-event loss that is NaN from the first
# batch): the log-likelihood takes torch.log of the observed times, and censored sequences have a
# time of exactly 0, so log gives -inf. The times need no gradient, so no graph node records that
# log; the product with the model's shape parameter carries the -inf into the loss, where
# 0 * -inf (the censoring indicator) makes it NaN.
import torch
from torch import nn
from torch.nn import functional as F


class WeibullHead(nn.Module):
    def __init__(self, features: int = 6) -> None:
        super().__init__()
        self.gru = nn.GRU(features, 16, batch_first=True)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        h, _ = self.gru(x)
        a, b = self.out(h[:, -1]).unbind(-1)
        return torch.exp(a), F.softplus(b) + 0.1


def weibull_loglik(t, u, a, b):
    """t: (N,) observed times; u: (N,) 1 when the event was seen; a, b: (N,) scale and shape."""
    ya = (t + 1e-9) / a
    return u * (torch.log(b) + b * (torch.log(t) - torch.log(a))) - ya ** b  # expect: TG405


torch.manual_seed(5)
model = WeibullHead()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randn(16, 10, 6)
    tte = torch.randint(0, 8, (16,)).float()  # 0 for sequences censored at their start
    u = (tte > 0).float()
    alpha, beta = model(x)
    loss = -weibull_loglik(tte, u, alpha, beta).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
