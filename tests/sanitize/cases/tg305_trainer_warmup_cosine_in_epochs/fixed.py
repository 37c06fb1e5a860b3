# Modelled on ivadomed/ivadomed#57 (https://github.com/ivadomed/ivadomed/issues/57): the trainer
# builds CosineAnnealingLR(optimizer, num_epochs) (here after a one-step linear warm-up, chained
# with SequentialLR) and a batch-end hook steps it after every batch, so the whole annealing runs
# in the first few batches and the rate then cycles up and down for the rest of training. The
# schedule's lengths belong in batches (or the hook belongs at the end of the epoch).
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR


class SegHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.out = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader, num_epochs: int,
                 warmup_epochs: int = 1) -> None:
        self.model, self.loader, self.num_epochs = model, loader, num_epochs
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        steps = len(loader)
        warmup = LinearLR(self.optimizer, start_factor=0.1, total_iters=warmup_epochs * steps)
        cosine = CosineAnnealingLR(self.optimizer, T_max=(num_epochs - warmup_epochs) * steps)
        self.scheduler = SequentialLR(self.optimizer, [warmup, cosine],
                                      milestones=[warmup_epochs * steps])
        self.history: list[float] = []

    def _after_batch(self, loss: torch.Tensor) -> None:
        self.scheduler.step()
        self.history.append(self.optimizer.param_groups[0]["lr"])

    def _train_epoch(self) -> float:
        self.model.train()
        total = 0.0
        for image, mask in self.loader:
            loss = F.binary_cross_entropy_with_logits(self.model(image), mask)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self._after_batch(loss)
            total += loss.item()
        return total / len(self.loader)

    def fit(self) -> None:
        for epoch in range(self.num_epochs):
            print(epoch, round(self._train_epoch(), 4), self.history[-1])


torch.manual_seed(0)
images = torch.randn(48, 1, 12, 12)
masks = (images > 0.5).float()
loader = DataLoader(TensorDataset(images, masks), batch_size=8, shuffle=True)
Trainer(SegHead(), loader, num_epochs=4).fit()
