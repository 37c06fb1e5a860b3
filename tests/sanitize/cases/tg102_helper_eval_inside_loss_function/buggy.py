# Modelled on kekmodel/FixMatch-pytorch#7 (https://github.com/kekmodel/FixMatch-pytorch/issues/7),
# where labelling the weak view in eval mode is written `model.eval(); logits_u_w =
# model(inputs_u_w); model.train()`. Here the labelling lives in a helper module that leaves the
# model in eval mode, and the loss function that calls it runs the training forward right after:
# every step trains with BatchNorm on its running statistics and Dropout off. The loss function's
# call of the helper is the line to change (train() after it); the training loop only calls the
# loss function, so the call at the loop would be the wrong place.
import torch
import torch.nn.functional as F
from torch import nn

import pseudo


def fixmatch_loss(model, labelled, targets, weak, strong):
    pseudo_labels, keep = pseudo.guess_labels(model, weak)  # expect: TG102
    logits = model(torch.cat([labelled, strong]))
    sup = F.cross_entropy(logits[: len(labelled)], targets)
    unsup = (F.cross_entropy(logits[len(labelled):], pseudo_labels, reduction="none") * keep).mean()
    return sup + unsup


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model.train()
for step in range(12):
    x, y = torch.randn(8, 10), torch.randint(0, 4, (8,))
    unlabelled = torch.randn(16, 10)
    loss = fixmatch_loss(model, x, y, unlabelled + 0.05 * torch.randn(16, 10),
                         unlabelled + 0.5 * torch.randn(16, 10))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
