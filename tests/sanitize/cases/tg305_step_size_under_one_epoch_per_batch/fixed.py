# Modelled on ivadomed/ivadomed#55 (https://github.com/ivadomed/ivadomed/pull/55): "Scheduler was
# incorrectly stepped in the batch loop instead of in the epoch loop ... causing the LR to be
# updated after each batch instead of after each epoch." Here StepLR's step_size (7, meant in
# epochs) is under an epoch of 10 batches but over half of one: on average the rate is cut 1.4
# times per epoch, and a whole epoch that cuts it twice shows the per-epoch schedule running per
# batch.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(160, 6), torch.randn(160, 1)), batch_size=16)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.5)
for epoch in range(4):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
