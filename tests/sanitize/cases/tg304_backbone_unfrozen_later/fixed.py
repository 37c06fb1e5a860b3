# Fixed twin of buggy.py (https://theneuralbase.com/pytorch/learn/intermediate/freezing-base-model-weights/):
# the unfrozen backbone joins the optimizer as a parameter group with a smaller learning rate, and
# a second stage rebuilds the optimizer over everything that requires grad.
import torch
from torch import nn

torch.manual_seed(3)
backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
head = nn.Linear(16, 3)
model = nn.Sequential(backbone, head)
backbone.requires_grad_(False)
optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
for epoch in range(8):
    if epoch == 2:
        backbone[2].requires_grad_(True)
        optimizer.add_param_group({"params": backbone[2].parameters(), "lr": 1e-3})
    if epoch == 5:
        backbone.requires_grad_(True)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for i in range(0, 64, 8):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[i:i + 8]), y[i:i + 8])
        loss.backward()
        optimizer.step()
print(f"loss {loss.item():.3f}")
