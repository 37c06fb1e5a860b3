# Fixed twin of buggy.py (https://github.com/deepset-ai/FARM/issues/229): the output is squeezed to
# (N,); a scalar target that broadcasts without growing the shape stays silent.
import torch
from torch import nn

torch.manual_seed(9)
x = torch.randn(32, 5)
y = x @ torch.tensor([1.0, -2.0, 0.5, 0.0, 1.5])
model = nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.MSELoss()

for step in range(5):
    optimizer.zero_grad()
    pred = model(x).squeeze(-1)
    loss = criterion(pred, y) + 1e-3 * nn.functional.mse_loss(pred.mean(), torch.tensor(0.0))
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
