"""10^4 tensors held in nested containers: per-sample outputs logged for 200 steps in a dict of
lists of (index, tensor) tuples, half detached and half still carrying their graph (the
"appended predictions" leak of the PyTorch FAQ, https://pytorch.org/docs/stable/notes/faq.html,
inside a metrics log)."""

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
log = {"train": [], "detached": []}
for step in range(200):
    x, y = torch.randn(25, 8), torch.randint(0, 2, (25,))
    optimizer.zero_grad()
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    optimizer.step()
    log["train"].append([(i, row) for i, row in enumerate(out)])  # 25 tensors with grad_fn
    log["detached"].append([(i, row.detach()) for i, row in enumerate(out)])
print(sum(len(batch) for batch in log["train"]) + sum(len(b) for b in log["detached"]))
save(model)
