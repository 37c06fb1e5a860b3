# Modelled on d2l-ai/d2l-en#1093 (https://github.com/d2l-ai/d2l-en/issues/1093): dropout written
# from scratch in notebook cells, with the "training" flag fixed to True instead of following the
# module's mode, so the test accuracy is computed with dropout still on after net.eval(). Here the
# flag is torch.dropout's required train argument, passed as True.
# %%
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
x_train, y_train = torch.randn(128, 20), torch.randint(0, 3, (128,))
x_test, y_test = torch.randn(64, 20), torch.randint(0, 3, (64,))

# %%
class DropoutMLP(nn.Module):
    def __init__(self, p1: float = 0.2, p2: float = 0.5) -> None:
        super().__init__()
        self.p1, self.p2 = p1, p2
        self.lin1, self.lin2, self.lin3 = nn.Linear(20, 64), nn.Linear(64, 32), nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.dropout(F.relu(self.lin1(x)), self.p1, self.training)
        h = F.dropout(F.relu(self.lin2(h)), self.p2, self.training)
        return self.lin3(h)


net = DropoutMLP()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)

# %%
for epoch in range(3):
    net.train()
    for i in range(0, 128, 32):
        loss = F.cross_entropy(net(x_train[i:i + 32]), y_train[i:i + 32])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

# %%
net.eval()
with torch.no_grad():
    accs = [(net(x_test).argmax(1) == y_test).float().mean().item() for _ in range(3)]
print("test accuracy over three passes:", accs)
