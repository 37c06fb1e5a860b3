# Modelled on the GitHub issues about soft targets for cross_entropy
# (https://github.com/Thunderbeee/ZSCL/issues/6), -1/+1 labels for a binary cross-entropy
# (https://github.com/huanglianghua/siamfc-pytorch/issues/37) and "Why is the value of
# BCEWithLogitsLoss negative?" (labels not 0/1, https://github.com/MontaEllis/Pytorch-Medical-Segmentation/issues/8): raw scores passed as "probabilities" to
# cross_entropy, and -1/+1 labels passed to BCEWithLogitsLoss. Neither raises.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(10)
x = torch.randn(32, 6)
scores = torch.randn(32, 3) * 2  # expect: TG402 (unnormalized teacher scores)
model = nn.Linear(6, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), scores)
    loss.backward()
    optimizer.step()

signs = torch.randint(0, 2, (32, 1)).float() * 2 - 1  # expect: TG402 (labels in {-1, +1})
binary = nn.Linear(6, 1)
opt_b = torch.optim.SGD(binary.parameters(), lr=0.1)
criterion = nn.BCEWithLogitsLoss()
for step in range(3):
    opt_b.zero_grad()
    loss_b = criterion(binary(x), signs)
    loss_b.backward()
    opt_b.step()
print(f"{loss.item():.3f} {loss_b.item():.3f}")
