# Fixed twin of buggy.py (https://github.com/giotto-ai/giotto-deep/issues/40): net.eval() before
# measuring accuracy (and torch.no_grad() around the one-off test accuracy).
import torch
from torch import nn

torch.manual_seed(1)
net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.4), nn.Linear(32, 4))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()
train_batches = [(torch.randn(16, 10), torch.randint(0, 4, (16,))) for _ in range(5)]
test_batches = [(torch.randn(16, 10), torch.randint(0, 4, (16,))) for _ in range(3)]

for epoch in range(2):
    for inputs, labels in train_batches:
        optimizer.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()

net.eval()
correct = total = 0
with torch.no_grad():
    for images, labels in test_batches:
        outputs = net(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
print(f"accuracy {100 * correct / total:.1f}%")

x_test, y_test = test_batches[0]
with torch.no_grad():
    acc_test = (torch.argmax(net(x_test), dim=1) == y_test).float().mean()
print(f"first batch {acc_test.item():.2f}")
