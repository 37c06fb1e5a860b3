# Modelled on avBuffer/UNet3plus_pth#23 (https://github.com/avBuffer/UNet3plus_pth/issues/23):
# the model's forward ends in a sigmoid while training uses a loss that applies the sigmoid
# itself, so the loss barely decreases. The module-level loop names its prediction `out`, as the
# forward names its own pre-activation: a name read inside the class is not the loop's, so the
# finding stays at the Sigmoid the model is built with (the line to change), not at the loss.
import torch
from torch import nn

torch.manual_seed(0)


class EdgeScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        self.act = nn.Sigmoid()  # expect: TG406

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
