# Modelled on the GitHub issue "Sigmoid before BCEWithLogitsLoss"
# (https://github.com/lopuhin/kaggle-imet-2019/issues/3) and the fix "Do not need sigmoid because
# there is sigmoid in BCEWithLogitsLoss" (https://github.com/yudi-mars/daisyRec/pull/15): the
# model's forward ends in torch.sigmoid and its output goes to BCEWithLogitsLoss.
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x):
        return torch.sigmoid(self.body(x))  # expect: TG406


torch.manual_seed(8)
x = torch.randn(40, 8)
y = (torch.rand(40, 3) > 0.5).float()
model = Tagger()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.BCEWithLogitsLoss()

for step in range(4):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
