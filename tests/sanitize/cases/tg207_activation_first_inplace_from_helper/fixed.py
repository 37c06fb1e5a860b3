# Report: https://github.com/NVlabs/FUNIT/issues/23
# Modelled on NVlabs/FUNIT#23 ("one of the variables needed for gradient computation has been
# modified by an inplace operation"). A discriminator's residual blocks apply their activation
# first; the activation comes from a helper that builds LeakyReLU(inplace=True), so the second
# block's activation overwrites the first block's activation output, which its backward saved.
import torch
from torch import nn


def make_activation(kind):
    if kind == "lrelu":
        return nn.LeakyReLU(0.2, inplace=False)
    return nn.Identity()


class ActFirstBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.act = make_activation("lrelu")
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return self.conv(self.act(x))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.act = make_activation("lrelu")
        self.blocks = nn.Sequential(ActFirstBlock(8), ActFirstBlock(8))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        h = self.act(self.stem(x))
        h = self.blocks(h)
        return self.head(h.mean((2, 3)))


critic = Critic()
opt = torch.optim.Adam(critic.parameters(), lr=1e-4)
for step in range(3):
    loss = torch.relu(1.0 - critic(torch.randn(4, 3, 16, 16))).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
