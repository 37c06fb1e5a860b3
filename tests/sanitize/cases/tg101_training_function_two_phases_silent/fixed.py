# Near miss for TG101's training functions used to evaluate: one training function serves two
# phases, called from two lines (pretraining, then fine-tuning on a partly labelled set), and skips
# the batches whose loss is not finite: a batch with every label set to `ignore_index` gives a NaN
# mean loss (CrossEntropyLoss, https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html;
# "skip the batch if the loss is NaN" is the usual forum answer). The first batches of the
# fine-tuning phase are all unlabelled, so for a while no backward reaches a call from its line;
# its later batches train, so it is training, not an evaluation. Validation is done right: eval
# mode, no grad.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                      nn.Linear(32, 3))
criterion = nn.CrossEntropyLoss(ignore_index=-1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)


def batches(n, unlabelled=0):
    out = []
    for i in range(n):
        y = torch.randint(0, 3, (16,))
        out.append((torch.randn(16, 8), torch.full_like(y, -1) if i < unlabelled else y))
    return out


def train_phase(data):
    model.train()
    skipped = 0
    for x, y in data:
        loss = criterion(model(x), y)
        if not torch.isfinite(loss):
            skipped += 1
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return skipped


def validate(data):
    model.eval()
    with torch.no_grad():
        return sum(criterion(model(x), y).item() for x, y in data) / len(data)


print(train_phase(batches(8)))
print(round(validate(batches(2)), 3))
print(train_phase(batches(8, unlabelled=3)))
print(round(validate(batches(2)), 3))
