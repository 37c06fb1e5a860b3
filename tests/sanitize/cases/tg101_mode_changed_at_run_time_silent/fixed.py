# Near miss for TG101: layers stop depending on the mode during the run. Dropout is switched off
# for good by setting p = 0 (nn.Dropout, https://pytorch.org/docs/stable/generated/torch.nn.Dropout.html),
# and test-time BatchNorm adaptation normalizes with the test batch's statistics on purpose,
# with track_running_stats turned off (Schneider et al. 2020, https://arxiv.org/abs/2006.16971).
# Accuracy taken in train mode afterwards is what the author wants.
import torch
from torch import nn

torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))
opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
x, y = torch.randn(64, 5), torch.randint(0, 3, (64,))
for epoch in range(4):
    if epoch == 2:
        for m in mlp.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
    opt.zero_grad()
    nn.functional.cross_entropy(mlp(x), y).backward()
    opt.step()
with torch.no_grad():
    train_accuracy = (mlp(x).argmax(1) == y).float().mean()

cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
opt = torch.optim.SGD(cnn.parameters(), lr=0.1)
for step in range(4):
    images, labels = torch.randn(16, 3, 8, 8), torch.randint(0, 4, (16,))
    opt.zero_grad()
    nn.functional.cross_entropy(cnn(images), labels).backward()
    opt.step()
cnn.train()
for m in cnn.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.track_running_stats = False
        m.running_mean = None
        m.running_var = None
correct = 0
with torch.no_grad():
    for _ in range(2):
        images, labels = torch.randn(32, 3, 8, 8) * 2 + 1, torch.randint(0, 4, (32,))
        correct += (cnn(images).argmax(1) == labels).sum().item()
print(train_accuracy.item() >= 0, correct >= 0)
