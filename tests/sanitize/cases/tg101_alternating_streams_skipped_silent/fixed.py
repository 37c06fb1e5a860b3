# Near miss for TG101's training functions used to evaluate: a labelled source stream and a
# sparsely labelled target stream (semi-supervised domain adaptation) are trained alternately
# through one train_step(), called from two lines. A target batch without any label gives a NaN
# mean loss (every target equals `ignore_index`, CrossEntropyLoss,
# https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html) and is skipped; the
# first target batches are all such batches, so for a while no backward reaches a call from the
# target line while the source line trains. Later target batches train: it is training.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(19)
xs_all = torch.randn(320, 10)
ys_all = (xs_all[:, 0] > 0).long()
xt_all = torch.randn(320, 10) + 0.5
yt_all = (xt_all[:, 0] > 0.5).long()
labelled = torch.rand(320) < 0.15
labelled[:48] = False  # the first three target batches are unlabelled
yt_all[~labelled] = -100
source = list(zip(xs_all.split(16), ys_all.split(16)))
target = list(zip(xt_all.split(16), yt_all.split(16)))

model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                      nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def train_step(x, y):
    loss = F.cross_entropy(model(x), y, ignore_index=-100)
    if torch.isnan(loss):  # no labelled sample in this batch
        return None
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


for epoch in range(2):
    model.train()
    skipped = 0
    for (xs, ys), (xt, yt) in zip(source, target):
        train_step(xs, ys)
        skipped += train_step(xt, yt) is None
    model.eval()
    with torch.no_grad():
        accuracy = (model(xt_all).argmax(1) == (xt_all[:, 0] > 0.5).long()).float().mean()
    print(epoch, skipped, round(accuracy.item(), 3))
