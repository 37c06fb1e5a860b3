# Modelled on the GitHub issues "ValueError: Using a target size (torch.Size([16])) that is
# different to the input size (torch.Size([16, 1]))" (https://github.com/nbertagnolli/pytorch-simple-gan/issues/1,
# https://github.com/YixinChen-AI/CVAE-GAN-zoos-PyTorch-Beginner/issues/9): a discriminator ending
# in Linear(..., 1) + Sigmoid gives (N, 1) while the real/fake labels are (N,), and BCELoss raises.
import torch
from torch import nn

torch.manual_seed(5)
discriminator = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
optimizer = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
criterion = nn.BCELoss()
real = torch.randn(16, 8) + 2.0
labels = torch.ones(16)
optimizer.zero_grad()
loss = criterion(discriminator(real), labels)  # expect: TG403
loss.backward()
optimizer.step()
