# Modelled on "Why do we need to call zero_grad() in PyTorch?"
# (https://flisks.com/python-why-do-we-need-to-call-zero-grad-in-pytorch) and the tutorial warning
# that backward adds into .grad (https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html):
# the loop never clears the gradients, so every step applies the sum of all earlier gradients.
import torch
from torch import nn

torch.manual_seed(2)
x = torch.randn(64, 5)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [0.0], [3.0]])
model = nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

for step in range(6):
    batch = slice(step * 8, step * 8 + 8)
    loss = nn.functional.mse_loss(model(x[batch]), y[batch])  # expect: TG301
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.3f}")
