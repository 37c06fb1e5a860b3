# Fixed twin of buggy.py
# (https://github.com/gorjanradevski/revisiting-spatial-temporal-layouts/issues/3):
# the labels are counted from 0 where the dataset reads them.
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)
LABEL_FILE = ["clip_%03d %d" % (i, 1 + i % 4) for i in range(32)]  # "clip_007 4"


class LayoutClips(Dataset):
    def __init__(self, lines, frames=6):
        self.samples = []
        for line in lines:
            clip, action = line.split()
            label = int(action) - 1
            self.samples.append((clip, label))
        self.frames = frames

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        clip, label = self.samples[index]
        boxes = torch.randn(self.frames, 8)
        return boxes, label


class LayoutClassifier(nn.Module):
    def __init__(self, actions=4):
        super().__init__()
        self.encoder = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, actions)

    def forward(self, boxes):
        _, h = self.encoder(boxes)
        return self.head(h[-1])


def train_epoch(net, loader, optimizer):
    criterion = nn.CrossEntropyLoss()
    for boxes, actions in loader:
        logits = net(boxes)
        loss = criterion(logits, actions)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


net = LayoutClassifier()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
loader = DataLoader(LayoutClips(LABEL_FILE), batch_size=8, shuffle=True)
print(f"loss {train_epoch(net, loader, optimizer):.3f}")
