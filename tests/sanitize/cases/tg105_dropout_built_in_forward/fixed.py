# Report: https://github.com/yangze0930/NTS-Net/issues/14
# A backbone applies dropout through a module built inside forward (nn.Dropout(p=0.5)(x)): a new
# module on every call, in training mode, that the model does not hold, so model.eval() never
# reaches it and the same input scores differently at test time.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(12, 32)
        self.head = nn.Linear(32, 3)
        self.dropout = nn.Dropout(p=0.5)

    def forward(self, x):
        h = F.relu(self.body(x))
        h = self.dropout(h)
        return self.head(h)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(64, 12), torch.randint(0, 3, (64,))
for step in range(20):
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

net.eval()
with torch.no_grad():
    first, second = net(x).argmax(1), net(x).argmax(1)
print("agreement between two test passes:", (first == second).float().mean().item())
