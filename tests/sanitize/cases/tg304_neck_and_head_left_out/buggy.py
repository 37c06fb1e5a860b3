# Modelled on the encoder + classifier pattern with one optimizer over every part
# (https://r2d.info/2019/01/15/pytorch/, SGD(list(encoder.parameters()) +
# list(classifier.parameters()))), split three ways as detection models are (backbone, neck,
# head). The optimizer is built over the backbone alone, so the neck and the head (called with a
# keyword argument) receive gradients every step and never change.
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 3)

    def forward(self, features):
        return self.fc(features)


torch.manual_seed(7)
backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
neck = nn.Sequential(nn.Linear(32, 16), nn.ReLU())
head = Head()
optimizer = torch.optim.Adam(backbone.parameters(), lr=1e-2)  # expect: TG304
x, y = torch.randn(48, 10), torch.randint(0, 3, (48,))
for step in range(60):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(head(features=neck(backbone(x))), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
