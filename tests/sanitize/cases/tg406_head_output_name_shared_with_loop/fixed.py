# Fixed twin of buggy.py (avBuffer/UNet3plus_pth#23,
# https://github.com/avBuffer/UNet3plus_pth/issues/23):
# the forward returns raw logits, which BCEWithLogitsLoss expects; silent.
import torch
from torch import nn

torch.manual_seed(0)


class EdgeScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        self.act = nn.Identity()

    def forward(self, x):
        out = self.net(x)
        return self.act(out)


model = EdgeScorer()
criterion = nn.BCEWithLogitsLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(30):
    x = torch.randn(32, 6)
    y = (x[:, 0] > 0).float().unsqueeze(1)
    out = model(x)
    loss = criterion(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
