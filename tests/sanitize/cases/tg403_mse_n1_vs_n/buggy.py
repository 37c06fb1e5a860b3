# Modelled on the GitHub issue "Using a target size ... that is different to the input size"
# (https://github.com/deepset-ai/FARM/issues/229): a regression head outputs (N, 1) while the
# targets are (N,), so MSELoss broadcasts to (N, N) and the model learns the mean target.
import warnings

import torch
from torch import nn

warnings.simplefilter("ignore", UserWarning)  # the run prints PyTorch's warning once; easy to miss
torch.manual_seed(9)
x = torch.randn(32, 5)
y = x @ torch.tensor([1.0, -2.0, 0.5, 0.0, 1.5])
model = nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.MSELoss()

for step in range(5):
    optimizer.zero_grad()
    pred = model(x)
    loss = criterion(pred, y)  # expect: TG403
    loss.backward()
    optimizer.step()
mae = nn.functional.l1_loss(model(x).detach(), y.unsqueeze(0))  # expect: TG403
print(f"loss {loss.item():.3f} mae {mae.item():.3f}")
