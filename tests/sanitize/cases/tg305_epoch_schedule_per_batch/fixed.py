# Fixed twin of buggy.py (https://github.com/ivadomed/ivadomed/pull/55,
# https://github.com/pytorch/pytorch/issues/3814): the StepLR steps once per epoch, after the batch
# loop. Beside it, schedules in iterations that are stepped per batch by design and must stay
# silent: torchvision's detection reference (a LinearLR warm-up stepped per iteration in the first
# epoch, then a MultiStepLR per epoch), a MultiStepLR whose milestones are given in iterations
# (beyond one pass), a StepLR sized from the loader (step_size=2 * len(loader)), an ExponentialLR
# with a gamma near 1, a CosineAnnealingLR over all iterations, "epochs" of a fixed number of
# batches drawn from one long DataLoader pass with a StepLR per such epoch, and hand-sliced batches
# whose per-epoch ExponentialLR steps once per epoch.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(3)
data = TensorDataset(torch.randn(640, 10), torch.randint(0, 3, (640,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))


def train(optimizer, epochs, per_batch=(), per_epoch=(), warmup=None):
    for epoch in range(epochs):
        model.train()
        for i, (inputs, labels) in enumerate(loader):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            if warmup is not None and epoch == 0:
                warmup.step()
            for scheduler in per_batch:
                scheduler.step()
        for scheduler in per_epoch:
            scheduler.step()


optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
train(optimizer, 3, per_epoch=[scheduler])

optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.001, total_iters=19)
main = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)
train(optimizer, 3, per_epoch=[main], warmup=warmup)

optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
iterations = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[40, 55], gamma=0.1)
train(optimizer, 3, per_batch=[iterations])

optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
sized = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2 * len(loader), gamma=0.5)
train(optimizer, 3, per_batch=[sized])

optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
slow = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.999)
train(optimizer, 2, per_batch=[slow])

optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3 * len(loader))
train(optimizer, 3, per_batch=[cosine])

long_loader = DataLoader(TensorDataset(torch.randn(6400, 10), torch.randint(0, 3, (6400,))),
                         batch_size=32)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
per_virtual_epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
batches = iter(long_loader)
for epoch in range(4):
    for _ in range(10):
        inputs, labels = next(batches)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    per_virtual_epoch.step()

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
    decay.step()
print(f"head lr: {decay.get_last_lr()[0]:.3g}")
