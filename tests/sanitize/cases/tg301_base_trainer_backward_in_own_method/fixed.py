# Modelled on GitHub yastrebksv/TennisCourtDetector#7
# (https://github.com/yastrebksv/TennisCourtDetector/issues/7): a base trainer class runs the
# backward in one method and the optimizer step in another, and nothing ever calls
# optimizer.zero_grad(), so every step applies the sum of all earlier gradients. Here, a small
# keypoint-heatmap regressor trained by a BaseTrainer subclass.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(2)


class HeatmapNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 2, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class BaseTrainer:
    def __init__(self, model, lr: float = 1e-3) -> None:
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def compute_loss(self, batch):
        raise NotImplementedError

    def backward(self, loss):
        loss.backward()

    def optimizer_step(self):
        self.optimizer.step()

    def train_epoch(self, batches):
        self.model.train()
        for batch in batches:
            loss = self.compute_loss(batch)
            self.optimizer.zero_grad()
            self.backward(loss)
            self.optimizer_step()


class CourtTrainer(BaseTrainer):
    def compute_loss(self, batch):
        images, heatmaps = batch
        return F.mse_loss(torch.sigmoid(self.model(images)), heatmaps)


def make_batches(n=4):
    out = []
    for _ in range(n):
        images = torch.randn(2, 1, 16, 16)
        out.append((images, (images.repeat(1, 2, 1, 1) > 1.0).float()))
    return out


trainer = CourtTrainer(HeatmapNet())
for epoch in range(2):
    trainer.train_epoch(make_batches())
print("trained")
