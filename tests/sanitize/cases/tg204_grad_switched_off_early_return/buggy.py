# Report: https://github.com/pytorch/pytorch/issues/5851
# Modelled on pytorch/pytorch#5851 (grad mode does not come back on after a region that turned it
# off, so later forwards build no graph). Here a forecaster's validation helper turns grad off
# with a bare torch.set_grad_enabled(False) and returns early on an empty window, skipping its
# set_grad_enabled(True): the next epoch's training backward finds no graph.
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
    torch.set_grad_enabled(False)  # expect: TG204
    total = 0.0
    for x, y in zip(xs + [torch.empty(0, 12)], ys):
        if y.numel() == 0:
            return total  # leaves grad mode off
        total += nn.functional.mse_loss(model(x), y).item()
    torch.set_grad_enabled(True)
    model.train()
    return total


for epoch in range(3):
    for i in range(0, 300, 50):
        loss = nn.functional.mse_loss(net(train_x[i:i + 50]), train_y[i:i + 50])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: val {validate(net, val_x, val_y):.4f}")
