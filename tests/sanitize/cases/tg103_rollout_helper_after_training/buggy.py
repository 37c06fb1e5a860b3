# Modelled on GitHub namisan/mt-dnn#92 (https://github.com/namisan/mt-dnn/pull/92): inference
# ran with autograd on, and the fix wrapped the evaluation's call of its prediction helper in
# `with torch.no_grad():`, at the caller, rather than the helper. Here, in notebook cells, a
# load forecaster is trained, then backtested: a helper rolls the network forward by feeding each
# prediction back into the next window, and the backtest cell calls it with grad on, so every
# window's rollout keeps one chained graph. The line to change is the cell's call of the helper.
# Fixed twin: that loop runs under torch.no_grad().
import torch
import torch.nn.functional as F
from torch import nn

# %% data and model
torch.manual_seed(2)
hours = torch.arange(0, 24 * 30, dtype=torch.float32)
load = torch.sin(hours * 2 * torch.pi / 24) + 0.1 * torch.randn_like(hours)
LAG = 12
net = nn.Sequential(nn.Linear(LAG, 32), nn.GELU(), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=3e-3)

# %% one-step training
windows = load[:-1].unfold(0, LAG, 1)[:-1]
targets = load[LAG:LAG + len(windows)].unsqueeze(1)
for epoch in range(30):
    loss = F.mse_loss(net(windows), targets)
    opt.zero_grad()
    loss.backward()
    opt.step()


# %% multi-step backtest
def forecast(model, window, horizon):
    outs = []
    for _ in range(horizon):
        nxt = model(window)
        outs.append(nxt)
        window = torch.cat([window[:, 1:], nxt], dim=1)
    return torch.cat(outs, dim=1)


errors = []
for start in range(0, 24 * 25, 24 * 5):
    seed = load[start:start + LAG].unsqueeze(0)
    pred = forecast(net, seed, 24)  # expect: TG103
    errors.append((pred - load[start + LAG:start + LAG + 24]).abs().mean())
print("backtest MAE per window:", [round(e.item(), 3) for e in errors])
