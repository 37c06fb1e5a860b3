# Modelled on the beginner mistake described in "How to Use optimizer.step() Correctly in PyTorch"
# (https://runebook.dev/en/docs/pytorch/generated/torch.optim.optimizer.step): the loop zeroes and
# backpropagates but never calls optimizer.step(), so the loss never moves.
import torch
from torch import nn

torch.manual_seed(5)
x = torch.randn(48, 6)
y = torch.randint(0, 3, (48,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()

for epoch in range(4):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()  # expect: TG303
    print(f"epoch {epoch} loss {loss.item():.4f}")
