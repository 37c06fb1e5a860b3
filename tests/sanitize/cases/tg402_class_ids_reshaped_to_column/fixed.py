# Fixed twin of buggy.py (https://github.com/hunkim/PyTorchZeroToAll/pull/28): the genre ids
# stay one index per clip, shape (N,), as CrossEntropyLoss needs.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class GenreTrainer:
    def __init__(self, n_mels=20, genres=5):
        self.net = nn.Sequential(nn.Linear(n_mels, 32), nn.ReLU(), nn.Linear(32, genres))
        self.criterion = nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, frames, genre_ids):
        targets = genre_ids.view(-1)
        logits = self.net(frames)
        loss = self.criterion(logits, targets)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


torch.manual_seed(4)
clips = TensorDataset(torch.randn(40, 20), torch.randint(0, 5, (40,)))
trainer = GenreTrainer()
for frames, genre_ids in DataLoader(clips, batch_size=8, shuffle=True):
    trainer.step(frames, genre_ids)
