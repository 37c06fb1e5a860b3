# Inside the package: a relative import of the model, trained then validated in train mode.
import torch
import torch.nn.functional as F

from .nets import Net


def validate(model, loader):
    with torch.no_grad():  # expect: TG101
        return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


def main():
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,)))]
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    print(validate(model, loader))
