# Modelled on GitHub yifita/deep_cage#16 (https://github.com/yifita/deep_cage/issues/16): a
# branch's output is detached before it enters the loss, so that branch's parameters, though given
# to the optimizer, never receive a gradient.
import torch
import torch.nn.functional as F
from torch import nn


class CageNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.weights_head = nn.Linear(8, 4)
        self.offset_head = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.encoder(x))
        weights = torch.softmax(self.weights_head(h), dim=1).detach()  # expect: TG205
        return weights * 2.0 + self.offset_head(h)


torch.manual_seed(14)
model = CageNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    x, target = torch.randn(8, 6), torch.randn(8, 4)
    optimizer.zero_grad()
    F.mse_loss(model(x), target).backward()
    optimizer.step()
