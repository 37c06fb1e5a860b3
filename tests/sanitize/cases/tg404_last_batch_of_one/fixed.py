# Fixed twin of buggy.py (https://discuss.pytorch.org/t/batch-norm-training-when-batch-size-1/102979):
# drop_last=True; and a convolutional net trained on single images, where BatchNorm2d sees H*W
# values per channel and trains fine, stays silent.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(15)
data = TensorDataset(torch.randn(33, 6), torch.randint(0, 2, (33,)))
loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()

conv = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
conv_opt = torch.optim.SGD(conv.parameters(), lr=0.1)
for step in range(3):
    conv_opt.zero_grad()
    loss = nn.functional.cross_entropy(conv(torch.randn(1, 1, 8, 8)), torch.tensor([step % 2]))
    loss.backward()
    conv_opt.step()
print(f"loss {loss.item():.3f}")
