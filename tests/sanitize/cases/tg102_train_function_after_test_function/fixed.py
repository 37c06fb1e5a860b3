# Modelled on GitHub pytorch/tutorials#1624 (https://github.com/pytorch/tutorials/pull/1624):
# a quickstart-style script with a train() and a test() function called once per epoch; test()
# switches the model to eval mode for itself and train() switches it back to training mode at
# its start, so every optimizer step runs in training mode.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(1)


def train(loader, model, optimizer):
    model.train()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test(loader, model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct


model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(4)]
for epoch in range(3):
    train(loader, model, optimizer)
    print(epoch, test(loader, model))
