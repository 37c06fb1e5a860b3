# Modelled on GitHub wolny/pytorch-3dunet#45 (https://github.com/wolny/pytorch-3dunet/issues/45):
# the network applies its final softmax only when it is not training (`if not self.training`), so
# the validation loss, computed in eval mode with CrossEntropyLoss, goes through a second softmax
# and sits far above the training loss although predictions are right. Here, a class-based trainer
# of a tiny segmentation CNN on random masks.
import torch
from torch import nn

torch.manual_seed(3)


class TinySegNet(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, classes, 1))
        self.final_activation = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.body(x)
        return x


class Trainer:
    def __init__(self) -> None:
        self.model = TinySegNet()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        self.criterion = nn.CrossEntropyLoss()

    def batch(self):
        images = torch.randn(4, 1, 12, 12)
        masks = (images[:, 0] > 0).long() + (images[:, 0] > 1).long()
        return images, masks

    def train_step(self) -> float:
        self.model.train()
        images, masks = self.batch()
        loss = self.criterion(self.model(images), masks)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def validate(self, batches: int = 2) -> float:
        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for _ in range(batches):
                images, masks = self.batch()
                total += self.criterion(self.model(images), masks).item()
        return total / batches

    def fit(self, epochs: int = 3) -> None:
        for epoch in range(epochs):
            train_loss = sum(self.train_step() for _ in range(4)) / 4
            print(f"epoch {epoch}: train {train_loss:.3f} val {self.validate():.3f}")


Trainer().fit()
