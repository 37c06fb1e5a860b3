# Modelled on https://github.com/ivadomed/ivadomed/pull/55 ("Scheduler was incorrectly stepped in
# the batch loop instead of in the epoch loop ... causing the LR to be updated after each batch") and
# on https://github.com/pytorch/pytorch/issues/3814 ("Scheduler should step after the end of each
# epoch, not after every iteration"): a StepLR meant as "divide by 10 every 7 epochs" (the transfer
# learning tutorial's schedule) is stepped after every optimizer step, so the rate is divided by 10
# every 7 batches. A second run slices its batches by hand (no DataLoader) with an ExponentialLR
# meant per epoch, stepped per batch until the rate is gone; a third accumulates gradients over 4
# batches and steps its per-epoch StepLR with each optimizer step; a fourth is torchvision's
# detection recipe (a LinearLR warm-up, then MultiStepLR(milestones=[8, 11]) meant in epochs) chained
# by SequentialLR and stepped every batch, with an encoder and a decoder called per batch.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(3)
data = TensorDataset(torch.randn(640, 10), torch.randint(0, 3, (640,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
for epoch in range(3):
    model.train()
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        scheduler.step()  # expect: TG305
print(f"lr after 3 epochs: {scheduler.get_last_lr()[0]:.3g}")

x, y = torch.randn(256, 10), torch.randint(0, 3, (256,))
head = nn.Linear(10, 3)
head_opt = torch.optim.Adam(head.parameters(), lr=1e-3)
decay = torch.optim.lr_scheduler.ExponentialLR(head_opt, gamma=0.5)
for epoch in range(4):
    for start in range(0, 256, 16):
        head_opt.zero_grad()
        loss = nn.functional.cross_entropy(head(x[start:start + 16]), y[start:start + 16])
        loss.backward()
        head_opt.step()
        decay.step()  # expect: TG305
print(f"head lr: {decay.get_last_lr()[0]:.3g}")

optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
accumulated = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
for epoch in range(2):
    for i, (inputs, labels) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(inputs), labels) / 4
        loss.backward()
        if (i + 1) % 4 == 0:
            optimizer.step()
            optimizer.zero_grad()
            accumulated.step()  # expect: TG305

encoder, decoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU()), nn.Linear(16, 3)
params = [*encoder.parameters(), *decoder.parameters()]
optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
steps = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[8, 11], gamma=0.1)
recipe = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, steps], milestones=[3])
for epoch in range(2):
    for inputs, labels in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(decoder(encoder(inputs)), labels).backward()
        optimizer.step()
        recipe.step()  # expect: TG305
