# Report: https://github.com/zhunzhong07/HHL/issues/8
# A classifier's optimizer gets the parameter groups a helper function lists (a lower
# learning rate for the backend); the pooler, moved out of the classifier in a refactor, is in no
# group, so it gets gradients and never changes. Its group belongs in the list the helper returns.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backend = nn.Linear(16, 32)
        self.pooler = nn.Sequential(nn.Linear(32, 32), nn.Tanh())
        self.head = nn.Linear(32, 2)

    def forward(self, x):
        return self.head(self.pooler(self.backend(x)))



def param_groups(model, lr):
    groups = [
        {"params": model.backend.parameters(), "lr": lr * 0.1},
        {"params": model.head.parameters(), "lr": lr},
        {"params": model.pooler.parameters(), "lr": lr},
    ]
    return groups


model = Classifier()
optimizer = torch.optim.AdamW(param_groups(model, 1e-3), weight_decay=0.01)
x, y = torch.randn(64, 16), torch.randint(0, 2, (64,))
for step in range(10):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
