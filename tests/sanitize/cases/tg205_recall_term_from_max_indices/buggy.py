# Modelled on GitHub shuaizzZ/Recall-Loss-PyTorch#1
# (https://github.com/shuaizzZ/Recall-Loss-PyTorch/issues/1): a recall term built from the class
# indices of `torch.max(logits, 1)` carries no gradient (integer indices end the graph). Added to
# a cross-entropy, nothing fails: every parameter still learns from the cross-entropy, and the
# recall term silently does nothing. Here, a pixel classifier trained on both terms.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)
CLASSES = 4


def recall_term(logits, target):
    _, predicted = torch.max(logits, 1)  # expect: TG205
    hits = F.one_hot(predicted, CLASSES) * F.one_hot(target, CLASSES)
    recall = (hits.sum(0) + 1.0) / (F.one_hot(target, CLASSES).sum(0) + 1.0)
    return 1.0 - recall.mean()


net = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, CLASSES))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
pixels, labels = torch.randn(96, 5), torch.randint(0, CLASSES, (96,))
for epoch in range(3):
    for x, y in zip(pixels.split(32), labels.split(32)):
        logits = net(x)
        loss = F.cross_entropy(logits, y) + 0.5 * recall_term(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
