# Modelled on the forum thread "Batch norm training when batch size=1"
# (https://discuss.pytorch.org/t/batch-norm-training-when-batch-size-1/102979): the training
# DataLoader is built in a helper without drop_last, 50 samples in batches of 7 leave a last batch
# of one, and the model's BatchNorm1d raises at that batch; the fix belongs where the loader is
# built.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loaders(features: torch.Tensor, labels: torch.Tensor, batch_size: int):
    train = TensorDataset(features[:50], labels[:50])
    val = TensorDataset(features[50:], labels[50:])
    return (DataLoader(train, batch_size=batch_size, shuffle=True),  # expect: TG404
            DataLoader(val, batch_size=batch_size))


class Recommender(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tower = nn.Sequential(nn.Linear(12, 24), nn.BatchNorm1d(24), nn.ReLU(),
                                   nn.Linear(24, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tower(x).squeeze(1)


def train(model, loader, optimizer, epochs: int) -> None:
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
            optimizer.step()


torch.manual_seed(8)
features, labels = torch.randn(64, 12), torch.randint(0, 2, (64,)).float()
train_loader, val_loader = make_loaders(features, labels, batch_size=7)
model = Recommender()
train(model, train_loader, torch.optim.Adam(model.parameters(), lr=1e-3), epochs=2)
