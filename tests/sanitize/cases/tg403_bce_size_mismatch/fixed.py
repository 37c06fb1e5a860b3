# Fixed twin of buggy.py (https://github.com/nbertagnolli/pytorch-simple-gan/issues/1): the
# discriminator's (N, 1) output is squeezed to (N,) to match the labels, as the answer
# (".squeeze(1)") says; a BCEWithLogitsLoss on (N, 1) logits with (N, 1) labels is fine as well.
import torch
from torch import nn

torch.manual_seed(5)
discriminator = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
optimizer = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
criterion = nn.BCELoss()
real = torch.randn(16, 8) + 2.0
labels = torch.ones(16)
optimizer.zero_grad()
loss = criterion(discriminator(real).squeeze(1), labels)
loss.backward()
optimizer.step()

logits = nn.Linear(8, 1)
loss = nn.BCEWithLogitsLoss()(logits(real), labels.unsqueeze(1))
loss.backward()
