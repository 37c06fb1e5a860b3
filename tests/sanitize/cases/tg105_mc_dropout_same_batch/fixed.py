# Modelled on TiagoCortinhal/SalsaNext#40 (https://github.com/TiagoCortinhal/SalsaNext/issues/40):
# Monte Carlo dropout at inference. The model is put in eval mode (its BatchNorm uses running
# statistics) while its forward keeps dropout on with training=True, and each batch is sampled
# several times to estimate the predictive mean and variance: dropout in eval mode on purpose.
import torch
import torch.nn.functional as F
from torch import nn


class UncertainRegressor(nn.Module):
    def __init__(self, p=0.2):
        super().__init__()
        self.p = p
        self.body = nn.Sequential(nn.Linear(5, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        return self.out(F.dropout(self.body(x), p=self.p, training=True))


torch.manual_seed(0)
model = UncertainRegressor()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x_train = torch.randn(128, 5)
y_train = x_train.sum(1, keepdim=True) + 0.1 * torch.randn(128, 1)
for epoch in range(5):
    loss = F.mse_loss(model(x_train), y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

model.eval()
x_test = torch.randn(16, 5)
with torch.no_grad():
    samples = torch.stack([model(x_test) for _ in range(20)])
mean, var = samples.mean(0), samples.var(0)
print(f"mean prediction {mean.mean().item():.3f}, mean predictive variance {var.mean().item():.4f}")
