# Fixed twin of buggy.py (GitHub ClementPinard/SfmLearner-Pytorch#5,
# https://github.com/ClementPinard/SfmLearner-Pytorch/issues/5): the helper always steps the
# optimizer and then, when there is one, the scheduler. Near-miss that must stay silent: the
# scheduler is stepped in a function apart from the one calling backward, once per step.
import torch
from torch import nn

torch.manual_seed(0)


def apply_update(optimizer, scheduler=None):
    optimizer.step()
    if scheduler is not None:
        scheduler.step()


def train_step(model, batch, optimizer, scheduler):
    frames, target = batch
    loss = nn.functional.mse_loss(model(frames), target)
    optimizer.zero_grad()
    loss.backward()
    apply_update(optimizer, scheduler)
    return loss.item()


model = nn.Sequential(nn.Linear(13, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.99)
for step in range(6):
    batch = (torch.randn(20, 13), torch.randn(20, 1))
    train_step(model, batch, optimizer, scheduler)
