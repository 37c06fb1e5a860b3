# Modelled on Coderx7/SimpleNet#2 (https://github.com/Coderx7/SimpleNet/issues/2): the model's
# own forward applies F.dropout2d(out, 0.1, training=True) after global max pooling, so after
# model.eval() the test predictions still change from one call to the next. Here a small 1-D
# signal classifier; each test batch is predicted once. Fixed twin: training=self.training.
import torch
import torch.nn.functional as F
from torch import nn


class SignalNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.BatchNorm1d(16), nn.ReLU(),
                                      nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU())
        self.head = nn.Linear(32, classes)

    def forward(self, signal):
        out = self.features(signal)
        out = F.max_pool1d(out, kernel_size=out.size(-1)).unsqueeze(-1)
        out = F.dropout2d(out, 0.1, training=True)  # expect: TG105
        return self.head(out.flatten(1))


def batches(n, size=16):
    for _ in range(n):
        y = torch.randint(0, 4, (size,))
        t = torch.linspace(0, 1, 64)
        x = torch.sin(2 * torch.pi * (y[:, None] + 1) * t) + 0.3 * torch.randn(size, 64)
        yield x.unsqueeze(1), y


torch.manual_seed(0)
net = SignalNet()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
net.train()
for x, y in batches(6):
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

net.eval()
correct = total = 0
with torch.no_grad():
    for x, y in batches(3):
        correct += (net(x).argmax(1) == y).sum().item()
        total += len(y)
print(f"test accuracy {correct / total:.3f}")
