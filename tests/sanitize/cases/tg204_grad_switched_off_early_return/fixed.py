# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/issues/5851): the validation helper
# turns grad off with a `with torch.no_grad():` block, which restores it however the helper
# returns.
import torch
from torch import nn

torch.manual_seed(0)

net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
series = torch.sin(torch.linspace(0, 30, 400))
windows = series.unfold(0, 13, 1)
train_x, train_y = windows[:300, :12], windows[:300, 12:]
val_x = list(windows[300:, :12].split(20))
val_y = list(windows[300:, 12:].split(20)) + [torch.empty(0, 1)]


def validate(model, xs, ys):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in zip(xs + [torch.empty(0, 12)], ys):
            if y.numel() == 0:
                break
            total += nn.functional.mse_loss(model(x), y).item()
    model.train()
    return total


for epoch in range(3):
    for i in range(0, 300, 50):
        loss = nn.functional.mse_loss(net(train_x[i:i + 50]), train_y[i:i + 50])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: val {validate(net, val_x, val_y):.4f}")
