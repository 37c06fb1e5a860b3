# Fixed twin of buggy.py (https://github.com/jeshraghian/snntorch/issues/250): the membrane
# state is reset before each batch, as snntorch's utils.reset does.
import torch
from torch import nn


class Leaky(nn.Module):
    def __init__(self, beta=0.9):
        super().__init__()
        self.beta = beta
        self.mem = torch.zeros(1)

    def reset(self):
        self.mem = torch.zeros(1)

    def forward(self, current):
        self.mem = self.beta * self.mem + current
        spikes = torch.sigmoid(5 * (self.mem - 1.0))
        return spikes


class SpikingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(10, 16), Leaky()
        self.fc2, self.lif2 = nn.Linear(16, 2), Leaky()

    def forward(self, x, steps=4):
        record = []
        for _ in range(steps):
            record.append(self.lif2(self.fc2(self.lif1(self.fc1(x)))))
        return torch.stack(record).mean(0)

    def reset(self):
        self.lif1.reset()
        self.lif2.reset()


torch.manual_seed(2)
net = SpikingNet()
optimizer = torch.optim.Adam(net.parameters(), lr=5e-3)
for batch in range(3):
    x, y = torch.randn(8, 10), torch.randint(0, 2, (8,))
    net.reset()
    loss = nn.functional.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"batch {batch}: loss {loss.item():.3f}")
