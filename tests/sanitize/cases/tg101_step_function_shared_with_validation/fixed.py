# Fixed twin of buggy.py (wolny/pytorch-3dunet#53,
# https://github.com/wolny/pytorch-3dunet/issues/53): the shared step stays, validation switches
# the model to eval mode and turns grad off, and training switches it back.
import torch
from torch import nn

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                   nn.Dropout(0.3), nn.Linear(32, 3))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.criterion = nn.CrossEntropyLoss()

    def _run_batch(self, x, y, train):
        output = self.model(x)
        loss = self.criterion(output, y)
        if train:
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def fit(self, train_batches, val_batches, epochs):
        for epoch in range(epochs):
            self.model.train()
            train_loss = sum(self._run_batch(x, y, True) for x, y in train_batches)
            self.model.eval()
            with torch.no_grad():
                val_loss = sum(self._run_batch(x, y, False) for x, y in val_batches)
            print(epoch, round(train_loss / len(train_batches), 3),
                  round(val_loss / len(val_batches), 3))


train_batches = [(torch.randn(16, 12), torch.randint(0, 3, (16,))) for _ in range(10)]
val_batches = [(torch.randn(16, 12), torch.randint(0, 3, (16,))) for _ in range(2)]
Trainer().fit(train_batches, val_batches, epochs=3)
