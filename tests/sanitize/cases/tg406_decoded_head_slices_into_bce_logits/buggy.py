# Report: https://github.com/argusswift/YOLOv4-pytorch/issues/89
# Modelled on argusswift/YOLOv4-pytorch#89 (objectness and class losses stuck near log 2). A
# one-scale detection head returns the raw map and its decoded form, torch.cat([xy, wh, conf,
# cls], -1); the loss slices objectness out of the decoded tensor, whose confidence already went
# through a sigmoid, and hands it to BCEWithLogitsLoss, which applies the sigmoid again.
import torch
from torch import nn

torch.manual_seed(0)
N_CLS, STRIDE = 2, 8


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 5 + N_CLS, 1)

    def forward(self, feat):
        p = self.conv(feat).permute(0, 2, 3, 1)
        xy = torch.sigmoid(p[..., 0:2]) * STRIDE
        wh = torch.exp(p[..., 2:4].clamp(max=4)) * STRIDE
        conf = torch.sigmoid(p[..., 4:5])  # expect: TG406
        cls = torch.softmax(p[..., 5:], dim=-1)
        return p, torch.cat([xy, wh, conf, cls], -1)


head = Head()
bce = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
for step in range(4):
    feat = torch.randn(4, 8, 6, 6)
    objectness = (torch.rand(4, 6, 6, 1) > 0.8).float()
    p, decoded = head(feat)
    loss = bce(decoded[..., 4:5], objectness)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", round(loss.item(), 4))
