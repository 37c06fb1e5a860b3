# Fixed twin of buggy.py (https://pytorch.org/docs/stable/notes/faq.html): sum Python floats.
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
        running_loss += loss.item()  # note: a CPU-GPU sync point on CUDA
    print(f"epoch {epoch}: loss {running_loss / 6:.4f}")
