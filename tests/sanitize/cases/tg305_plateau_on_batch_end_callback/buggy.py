# Modelled on https://github.com/Lightning-AI/pytorch-lightning/issues/1156 (a ReduceLROnPlateau set
# to step every batch: "you are calling the .step() method for ReduceLROnPlateau after each batch")
# and https://github.com/abhishekkrthakur/wtfml/issues/7 (an engine that steps its scheduler every
# batch, asked how ReduceLROnPlateau fits): a fit loop with callbacks whose LR callback steps a
# ReduceLROnPlateau(patience=3) on "batch end" with the mini-batch training loss. Patience counts
# calls, so four noisy batches without a new best cut the rate, several times per epoch. A second
# model steps a plateau per iteration by design, with its patience in iterations (three epochs).
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Callback:
    def on_batch_end(self, fit, loss):
        pass

    def on_epoch_end(self, fit, val_loss):
        pass


class PlateauPolicy(Callback):
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def on_batch_end(self, fit, loss):
        self.scheduler.step(loss)  # expect: TG305


class IterationPlateau(Callback):
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def on_batch_end(self, fit, loss):
        self.scheduler.step(loss)


def fit(model, optimizer, train, val, epochs, callbacks):
    for epoch in range(epochs):
        model.train()
        for features, target in train:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(features), target)
            loss.backward()
            optimizer.step()
            for callback in callbacks:
                callback.on_batch_end(fit, loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.mse_loss(model(f), t).item() for f, t in val) / len(val)
        for callback in callbacks:
            callback.on_epoch_end(fit, val_loss)
    return optimizer.param_groups[0]["lr"]


torch.manual_seed(0)
features = torch.randn(400, 12)
target = features[:, :3].sum(1, keepdim=True) + 0.5 * torch.randn(400, 1)
train = DataLoader(TensorDataset(features[:320], target[:320]), batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(features[320:], target[320:]), batch_size=40)

model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=3, factor=0.5)
print(f"final lr {fit(model, optimizer, train, val, 4, [PlateauPolicy(plateau)]):.3g}")

model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
per_iteration = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=3 * len(train))
print(f"final lr {fit(model, optimizer, train, val, 4, [IterationPlateau(per_iteration)]):.3g}")
