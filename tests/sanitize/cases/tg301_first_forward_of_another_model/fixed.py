# Modelled on GitHub yastrebksv/TennisCourtDetector#7
# (https://github.com/yastrebksv/TennisCourtDetector/issues/7): the keypoint trainer's loop runs
# backward() and optimizer.step() with no zero_grad(), so each step applies the sum of all
# earlier gradients. Here the step first runs an exponential-moving-average copy of the network
# (for a consistency target, detached); the optimizer does not hold that copy, so the missing
# zeroing belongs before the trained network's own forward.
import copy

import torch
from torch import nn


class HeatmapNet(nn.Module):
    def __init__(self, keypoints: int = 4) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, keypoints, 3, padding=1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.body(images)


class BaseTrainer:
    def __init__(self, model: nn.Module, lr: float = 1e-2, decay: float = 0.9) -> None:
        self.model, self.decay = model, decay
        self.ema = copy.deepcopy(model).requires_grad_(False)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def train_step(self, images, heatmaps):
        target = 0.5 * heatmaps + 0.5 * torch.sigmoid(self.ema(images)).detach()
        self.optimizer.zero_grad()
        out = self.model(images)
        loss = nn.functional.mse_loss(torch.sigmoid(out), target)
        loss.backward()
        self.optimizer.step()
        with torch.no_grad():
            for e, p in zip(self.ema.parameters(), self.model.parameters()):
                e.mul_(self.decay).add_(p, alpha=1 - self.decay)
        return loss.item()


torch.manual_seed(0)
images = torch.rand(32, 3, 16, 16)
heatmaps = (torch.rand(32, 4, 16, 16) > 0.95).float()
trainer = BaseTrainer(HeatmapNet())
for epoch in range(3):
    for i in range(0, 32, 8):
        loss = trainer.train_step(images[i:i + 8], heatmaps[i:i + 8])
print(f"loss {loss:.4f}")
