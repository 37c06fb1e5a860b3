# Fixed twin of buggy.py (https://github.com/Justin-A/DeepLearning101/issues/15): the head is
# sized from the folder's classes.
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(4)


class InsectFolder(Dataset):
    """Like torchvision's ImageFolder: `classes` names the class folders, labels index it."""

    def __init__(self, per_class=8):
        self.classes = ["ants", "bees", "wasps"]
        self.samples = [(torch.rand(3, 16, 16), k) for k in range(3) for _ in range(per_class)]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        return self.samples[index]


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(8, 1000)

    def forward(self, x):
        return self.fc(self.features(x))


def train(model, loader, optimizer, epochs=2):
    criterion = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
    return loss.item()


model = SmallResNet()
num_ftrs = model.fc.in_features
loader = DataLoader(InsectFolder(), batch_size=6, shuffle=True)
model.fc = nn.Linear(num_ftrs, len(loader.dataset.classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
print(f"loss {train(model, loader, optimizer):.3f}")
