# Modelled on avBuffer/UNet3plus_pth#23 (https://github.com/avBuffer/UNet3plus_pth/issues/23):
# "if using bceloss in train.py, then unet3plus.py should not apply a sigmoid activation ...
# Otherwise you're applying sigmoid twice and the loss may not decrease". The segmentation net's
# forward ends in a sigmoid; the training loop calls its output `mask_logits`, feeds it to
# BCEWithLogitsLoss and also keeps its mean for a progress bar. Other code reads the value, but
# only as a number to show, and its author names it logits: the sigmoid is the line to change.
import torch
import torch.nn.functional as F
from torch import nn


class TinySegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        d1 = self.head(self.enc(x))
        return F.sigmoid(d1)  # expect: TG406


torch.manual_seed(0)
images = torch.randn(16, 1, 12, 12)
masks = (images > 0.3).float()
net = TinySegNet()
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
postfix = []
for epoch in range(3):
    for i in range(0, 16, 4):
        mask_logits = net(images[i:i + 4])
        loss = criterion(mask_logits, masks[i:i + 4])
        postfix.append(mask_logits.detach().mean().item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
