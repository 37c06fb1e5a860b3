# Modelled on GitHub ClementPinard/SfmLearner-Pytorch#5
# (https://github.com/ClementPinard/SfmLearner-Pytorch/issues/5): with a scheduler configured, the
# update helper stepped the scheduler *instead of* the optimizer (`if scheduler: scheduler.step()
# else: optimizer.step()`), so the learning rate moved but the weights never did and the loss did
# not come down. Here a small speech-feature regressor is trained by a step function that hands
# the update to a helper; the helper is where optimizer.step() belongs.
import torch
from torch import nn

torch.manual_seed(0)


def apply_update(optimizer, scheduler=None):
    if scheduler is not None:
        scheduler.step()  # expect: TG303, TG305
    else:
        optimizer.step()


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
