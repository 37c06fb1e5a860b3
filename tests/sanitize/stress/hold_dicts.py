"""Each step's loss kept in a list of dicts for 300 steps (a log of records): every step's graph
stays alive, held one level deeper than a list of tensors. The PyTorch FAQ's "Don't accumulate
history across your training loop" (https://pytorch.org/docs/stable/notes/faq.html), with the
tensor inside a record."""

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for step in range(300):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    history.append({"step": step, "loss": loss})  # the tensor, graph included
save(model)
