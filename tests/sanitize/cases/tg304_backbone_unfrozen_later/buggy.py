# Modelled on "Freezing base model weights" (https://theneuralbase.com/pytorch/learn/intermediate/freezing-base-model-weights/),
# which warns that unfreezing mid-training and stepping the same optimizer "uses stale
# param_groups": gradual unfreezing trains the head on a frozen backbone for two epochs, then sets
# requires_grad on the backbone but keeps the head-only optimizer, so the backbone receives
# gradients and never moves.
import torch
from torch import nn

torch.manual_seed(3)
backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
head = nn.Linear(16, 3)
model = nn.Sequential(backbone, head)
backbone.requires_grad_(False)
optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)  # expect: TG304
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
for epoch in range(6):
    if epoch == 2:
        backbone.requires_grad_(True)  # the optimizer still holds the head only
    for i in range(0, 64, 8):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[i:i + 8]), y[i:i + 8])
        loss.backward()
        optimizer.step()
print(f"loss {loss.item():.3f}")
