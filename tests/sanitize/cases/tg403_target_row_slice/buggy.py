# Modelled on pytorch/pytorch#16045 (https://github.com/pytorch/pytorch/issues/16045), where
# nn.MSELoss broadcasts mismatched shapes and silently gives the wrong result. Here a sequence
# regressor predicts the next value for a batch of windows, but the loss is given the first
# window's target only (`targets[:1]`, a (1, 1) slice of the (16, 1) targets): it broadcasts to
# every prediction, so all of them are trained towards one number. The slice is the line to fix.
import torch
from torch import nn

torch.manual_seed(0)
t = torch.linspace(0, 12, 400)
series = torch.sin(t) + 0.05 * torch.randn(400)
windows = torch.stack([series[i:i + 20] for i in range(300)]).unsqueeze(-1)
targets = torch.stack([series[i + 20] for i in range(300)]).unsqueeze(-1)

rnn = nn.GRU(1, 16, batch_first=True)
head = nn.Linear(16, 1)
opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
criterion = nn.MSELoss()
for epoch in range(3):
    for i in range(0, 288, 16):
        out, _ = rnn(windows[i:i + 16])
        pred = head(out[:, -1])
        y = targets[i:i + 16]
        loss = criterion(pred, y[:1])  # expect: TG403
        opt.zero_grad()
        loss.backward()
        opt.step()
