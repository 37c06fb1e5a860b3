# Modelled on the question "where should optimizer.zero_grad() go?" (answer: anywhere except
# between loss.backward() and optimizer.step(), https://velog.io/@rhss10/기본-optimizer.zerograd는-어디에-넣어주어야-할까)
# and the step order in https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html:
# the gradients are cleared right before the step, so every step applies zeros.
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(64, 4)
y = x @ torch.tensor([[2.0], [-1.0], [0.5], [1.0]])
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.MSELoss()

for step in range(5):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # expect: TG302
    optimizer.step()
print(f"loss {loss.item():.3f} (does not go down)")
