# Modelled on GitHub facebookresearch/fairchem#199
# (https://github.com/facebookresearch/fairchem/pull/199): validation used more memory than
# training; here the evaluation loop switches grad mode on with torch.set_grad_enabled(True)
# inside its torch.no_grad() block, so each batch's prediction carries a graph no backward uses.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(4)
model = nn.Sequential(nn.Conv1d(2, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 12, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 2, 12), torch.randint(0, 3, (8,))) for _ in range(5)]

for epoch in range(2):
    model.train()
    for x, y in data[:4]:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    model.eval()
    outputs = []
    with torch.no_grad():
        for x, y in data[4:]:
            outputs.append(model(x))
    print(epoch, sum(o.argmax(1).float().mean().item() for o in outputs))
