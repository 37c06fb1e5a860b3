# Trains the helper-built model, then measures accuracy without model.eval().
import torch
import torch.nn.functional as F

from models import make

model = make()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,)))]
val_loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,)))]
for epoch in range(2):
    for x, y in train_loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

correct = 0  # expect: TG101
with torch.no_grad():
    for x, y in val_loader:
        correct += (model(x).argmax(1) == y).sum().item()
print(correct)
