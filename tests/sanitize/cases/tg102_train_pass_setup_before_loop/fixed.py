# Fixed twin of buggy.py (pytorch/tutorials#1540,
# https://github.com/pytorch/tutorials/issues/1540): the training pass puts the model back in
# training mode first, whatever mode the previous epoch's measure() left.
import torch
from torch import nn

torch.manual_seed(3)


def train_pass(model, batches, optimizer):
    model.train()
    order = torch.randperm(len(batches)).tolist()
    running = 0.0
    for k in order:
        tokens, label = batches[k]
        loss = nn.functional.cross_entropy(model(tokens), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    return running / len(order)


def measure(model, batches):
    model.eval()
    hits = 0
    with torch.no_grad():
        for tokens, label in batches:
            hits += (model(tokens).argmax(1) == label).sum().item()
    return hits


def main():
    model = nn.Sequential(nn.Linear(50, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(24, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = [(torch.rand(12, 50), torch.randint(0, 4, (12,))) for _ in range(5)]
    for epoch in range(3):
        loss = train_pass(model, batches, optimizer)
        print(epoch, round(loss, 3), measure(model, batches))


main()
