# Fixed twin of buggy.py (https://flisks.com/python-why-do-we-need-to-call-zero-grad-in-pytorch).
# Near-misses that must stay silent: gradient accumulation over 4 micro-batches with one step and
# zero_grad after the step, gradient clipping, and a second loop that zeroes with p.grad = None.
import torch
from torch import nn

torch.manual_seed(2)
x = torch.randn(64, 5)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [0.0], [3.0]])
model = nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
accumulation = 4  # micro-batches per optimizer step

for micro_step in range(16):
    batch = slice((micro_step % 8) * 8, (micro_step % 8) * 8 + 8)
    loss = nn.functional.mse_loss(model(x[batch]), y[batch]) / accumulation
    loss.backward()
    if (micro_step + 1) % accumulation == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

for step in range(4):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    for p in model.parameters():
        p.grad = None
print(f"final loss {loss.item():.3f}")
