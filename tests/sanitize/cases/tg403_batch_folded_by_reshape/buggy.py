# Modelled on https://github.com/karpathy/neuraltalk2/issues/90 ("when it arrives through the
# View(-1) unit, it converts a 4-dim tensor (16,512,7,7) to a 1-dim tensor (16*512*7*7) ... which
# obviously seems to be dependent of the batch size") and
# https://github.com/qijiezhao/pseudo-3d-pytorch/issues/28 (a view(-1, ...) that moves samples
# out of the batch dimension): a 1-D conv regressor of sensor windows whose head flattens with
# torch.reshape(h, (1, -1)) and whose first Linear was sized from the whole batch's features. The
# model returns one row for a batch of 16; L1 loss broadcasts it against the 16 targets.
import torch
from torch import nn
import torch.nn.functional as F

BATCH = 16


class WindowRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(3, 8, 5, padding=2), nn.ReLU(), nn.MaxPool1d(4))
        self.head = nn.Sequential(nn.Linear(BATCH * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        h = self.conv(x)
        h = torch.reshape(h, (1, -1))  # expect: TG403
        return self.head(h)


torch.manual_seed(0)
windows = torch.randn(320, 3, 32)
targets = torch.stack([windows[:, 0].mean(1), windows[:, 1].std(1)], dim=1)
model = WindowRegressor()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for i in range(0, len(windows), BATCH):
        optimizer.zero_grad()
        loss = F.l1_loss(model(windows[i:i + BATCH]), targets[i:i + BATCH])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
