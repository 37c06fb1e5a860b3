# Report: https://github.com/eriklindernoren/PyTorch-YOLOv3/issues/325
# Modelled on GitHub eriklindernoren/PyTorch-YOLOv3#325 ("Gradient accumulations not working as
# expected"): the step sits with zero_grad under `if batches_done % accumulations:`, which with
# accumulations = 1 is never true, so the optimizer never steps (and is never zeroed) while
# backward runs every batch. Fixed twin: the test is `% accumulations == 0`.
import torch
import torch.nn.functional as F
from torch import nn


class TinyDetector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(16, 5, 1)  # objectness + 4 box offsets per cell

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images))


class Trainer:
    def __init__(self, accumulations: int) -> None:
        self.model = TinyDetector()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.accumulations = accumulations

    def fit(self, batches, epochs: int) -> float:
        batches_done = 0
        for _ in range(epochs):
            for images, targets in batches:
                loss = F.mse_loss(self.model(images), targets)
                loss.backward()
                batches_done += 1
                if batches_done % self.accumulations:  # expect: TG303
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        return loss.item()


torch.manual_seed(1)
data = [(torch.randn(4, 3, 16, 16), torch.randn(4, 5, 8, 8)) for _ in range(3)]
print(f"loss {Trainer(accumulations=1).fit(data, epochs=2):.3f}")
