# Modelled on "CUDA out of memory after more than 8000 iterators"
# (https://discuss.pytorch.org/t/cuda-out-of-memory-after-more-than-8000-iterators/27253) and the
# PyTorch FAQ "Don't accumulate history across your training loop"
# (https://pytorch.org/docs/stable/notes/faq.html): the epoch's loss is summed as a tensor, so the
# running sum keeps every step's graph alive.
import torch
from torch import nn

torch.manual_seed(0)
features = torch.randn(96, 10)
targets = features[:, :1] * 2.0 - features[:, 1:2]
model = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.MSELoss()

for epoch in range(2):
    running_loss = 0.0
    for start in range(0, 96, 16):
        x, y = features[start:start + 16], targets[start:start + 16]
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss  # expect: TG201
    print(f"epoch {epoch}: loss {running_loss.item() / 6:.4f}")
