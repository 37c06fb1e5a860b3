# Modelled on giotto-ai/giotto-deep#40 "use model.eval() to deal with dropout during evaluation
# phase" (https://github.com/giotto-ai/giotto-deep/issues/40): accuracy is computed with the
# tutorial's `_, predicted = torch.max(outputs.data, 1)` while Dropout is still active, at the top
# level of a script; and a one-off test accuracy is taken with grad on, again in train mode.
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

correct = total = 0  # expect: TG101
with torch.no_grad():
    for images, labels in test_batches:
        outputs = net(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
print(f"accuracy {100 * correct / total:.1f}%")

x_test, y_test = test_batches[0]
acc_test = (torch.argmax(net(x_test), dim=1) == y_test).float().mean()  # expect: TG101
print(f"first batch {acc_test.item():.2f}")
