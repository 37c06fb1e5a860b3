# Correct programs that step StepLR/ExponentialLR per iteration, as many repositories do with a
# schedule written in iterations (https://github.com/crowsonkb/k-diffusion/issues/50: "the LR
# scheduler ... is being used in the per step mode rather than per epoch"), each of which once looked
# like a per-epoch schedule stepped per batch: validation over a long batch-size-1 loader inside the
# batch loop, zip() of a short labeled and a long unlabeled loader (an epoch is the shorter),
# gradient accumulation with a period in optimizer steps, a period of len(dataset) // batch_size
# batches (one short of len(loader)), full-batch training, where a step is an epoch, training
# through itertools.cycle() with a few validation batches read now and then (islice), a model of
# plain tensors whose validation pass makes no optimizer step, a StepLR of 300 iterations on a
# loader of 1000 batches that the run leaves before its end, and a domain-adaptation loop drawing
# a target batch per source batch from a long-lived iterator, with a StepLR per source epoch.
import itertools

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(11)
x, y = torch.randn(384, 10), torch.randint(0, 3, (384,))
train = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)  # 12 batches
val = DataLoader(TensorDataset(x[:100], y[:100]), batch_size=1)  # 100 batches
unlabeled = DataLoader(TensorDataset(torch.randn(1000, 10)), batch_size=16)  # 63 batches
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))


def batch_step(optimizer, inputs, labels, scale=1.0):
    loss = nn.functional.cross_entropy(model(inputs), labels) * scale
    loss.backward()
    return loss


optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
iterations = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.5)
it = 0
while it < 60:
    for inputs, labels in train:
        optimizer.zero_grad()
        batch_step(optimizer, inputs, labels)
        optimizer.step()
        iterations.step()
        it += 1
        if it % 10 == 0:
            model.eval()
            with torch.no_grad():
                accuracy = sum((model(v).argmax(1) == t).sum().item() for v, t in val) / 100
            model.train()
        if it >= 60:
            break

optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
two_epochs = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2 * 12, gamma=0.5)
for epoch in range(3):
    for (inputs, labels), (extra,) in zip(train, unlabeled):
        optimizer.zero_grad()
        probs = model(extra).softmax(1)
        entropy = -(probs * probs.clamp_min(1e-8).log()).sum(1).mean()
        loss = nn.functional.cross_entropy(model(inputs), labels) + 0.1 * entropy
        loss.backward()
        optimizer.step()
        two_epochs.step()

optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
updates = torch.optim.lr_scheduler.StepLR(optimizer, step_size=6, gamma=0.5)  # 2 epochs of 3
for epoch in range(3):
    for i, (inputs, labels) in enumerate(train):
        batch_step(optimizer, inputs, labels, scale=0.25)
        if (i + 1) % 4 == 0:
            optimizer.step()
            optimizer.zero_grad()
            updates.step()

optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
per_epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=len(x) // 40, gamma=0.8)
floor = DataLoader(TensorDataset(x, y), batch_size=40)  # 10 batches, the last one short
for epoch in range(3):
    for inputs, labels in floor:
        optimizer.zero_grad()
        batch_step(optimizer, inputs, labels)
        optimizer.step()
        per_epoch.step()

optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.995)
for epoch in range(1200):  # full batch: one optimizer step per epoch
    optimizer.zero_grad()
    batch_step(optimizer, x, y)
    optimizer.step()
    decay.step()
print(f"final lr {decay.get_last_lr()[0]:.3g}")

optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
cycled = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[30, 45], gamma=0.1)
for it, (inputs, labels) in enumerate(itertools.cycle(train)):
    optimizer.zero_grad()
    batch_step(optimizer, inputs, labels)
    optimizer.step()
    cycled.step()
    if it % 20 == 0:
        with torch.no_grad():
            probe = [model(v) for v, _ in itertools.islice(val, 5)]
    if it == 60:
        break

weight = torch.zeros(10, 3, requires_grad=True)
optimizer = torch.optim.SGD([weight], lr=0.1)
per_epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
small = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=32)
for epoch in range(6):
    for inputs, labels in small:
        optimizer.zero_grad()
        nn.functional.cross_entropy(inputs @ weight, labels).backward()
        optimizer.step()
    with torch.no_grad():
        accuracy = sum((v @ weight).argmax(1).eq(t).sum().item() for v, t in small)
    per_epoch.step()

optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
short_run = torch.optim.lr_scheduler.StepLR(optimizer, step_size=300, gamma=0.5)
big = DataLoader(TensorDataset(torch.randn(32000, 10), torch.randint(0, 3, (32000,))),
                 batch_size=32)
for it, (inputs, labels) in enumerate(big):
    optimizer.zero_grad()
    batch_step(optimizer, inputs, labels)
    optimizer.step()
    short_run.step()
    if it == 90:
        break

source = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=32, drop_last=True)  # 2 batches
target = DataLoader(TensorDataset(torch.randn(400, 10)), batch_size=8, drop_last=True)  # 50
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
per_source_epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
stream = iter(target)
for epoch in range(40):
    for inputs, labels in source:
        try:
            (unlabeled,) = next(stream)
        except StopIteration:
            stream = iter(target)
            (unlabeled,) = next(stream)
        optimizer.zero_grad()
        probs = model(unlabeled).softmax(1)
        entropy = -(probs * probs.clamp_min(1e-8).log()).sum(1).mean()
        (nn.functional.cross_entropy(model(inputs), labels) + 0.1 * entropy).backward()
        optimizer.step()
    per_source_epoch.step()
