# Fixed twin of buggy.py (https://github.com/zhunzhong07/HHL/issues/8): the embedding layer
# has its own group in the list the helper returns.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class ReIDNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.base = nn.Sequential(nn.Linear(24, 48), nn.ReLU())
        self.embedding = nn.Linear(48, 16)
        self.classifier = nn.Linear(16, classes)

    def forward(self, x):
        return self.classifier(F.relu(self.embedding(self.base(x))))


def optimizer_groups(net, lr):
    return [
        {"params": net.base.parameters(), "lr": lr * 0.1},
        {"params": net.embedding.parameters(), "lr": lr},
        {"params": net.classifier.parameters(), "lr": lr},
    ]


def build_trainer(net, args):
    groups = optimizer_groups(net, args["lr"])
    optimizer = torch.optim.SGD(groups, momentum=0.9, weight_decay=5e-4)
    return optimizer


net = ReIDNet()
optimizer = build_trainer(net, {"lr": 0.1})
x, y = torch.randn(40, 24), torch.randint(0, 5, (40,))
for step in range(8):
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
