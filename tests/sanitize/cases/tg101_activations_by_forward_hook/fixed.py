# Fixed twin of buggy.py (https://github.com/BNUCNL/dnnbrain/pull/72): the network is put in eval
# mode before its activations are read.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1)
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def extract(net, stimuli, layer):
    feats = []
    handle = layer.register_forward_hook(lambda m, i, o: feats.append(o.detach()))
    net.eval()
    with torch.no_grad():
        for chunk in stimuli.split(64):
            net(chunk)
    handle.remove()
    return torch.cat(feats)


net = Net()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
x, y = torch.randn(256, 1, 8, 8), torch.randint(0, 10, (256,))
net.train()
for step in range(10):
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

a = extract(net, x, net.fc1)
b = extract(net, x, net.fc1)
print("max drift", (a - b).abs().max().item())
