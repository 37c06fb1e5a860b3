# Modelled on GitHub shuaizzZ/Recall-Loss-PyTorch#1
# (https://github.com/shuaizzZ/Recall-Loss-PyTorch/issues/1): the recall term is computed from
# the softmax probabilities, so it trains the classifier beside the cross-entropy. Correct
# look-alikes of an index taken from the logits stay silent: an accuracy logged beside the loss,
# a hard one-hot passed straight through (y_hard - y_soft.detach() + y_soft), class indices
# used as a pseudo-label target, and a running total started at zero.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)
CLASSES = 4


def recall_term(logits, target):
    onehot = F.one_hot(target, CLASSES).float()
    hits = logits.softmax(1) * onehot
    recall = (hits.sum(0) + 1.0) / (onehot.sum(0) + 1.0)
    return 1.0 - recall.mean()


def hard_straight_through(logits):
    y_soft = logits.softmax(1)
    y_hard = F.one_hot(y_soft.argmax(1), CLASSES).float()
    return y_hard - y_soft.detach() + y_soft


net = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, CLASSES))
codes = nn.Linear(CLASSES, 3)
optimizer = torch.optim.SGD([*net.parameters(), *codes.parameters()], lr=0.1)
pixels, labels = torch.randn(96, 5), torch.randint(0, CLASSES, (96,))
for epoch in range(3):
    for x, y in zip(pixels.split(32), labels.split(32)):
        logits = net(x)
        pseudo = logits.argmax(1)
        code_loss = codes(hard_straight_through(logits)).pow(2).mean()
        loss = torch.zeros(())  # a running total: its first addition has one constant input
        loss = loss + F.cross_entropy(logits, y) + 0.5 * recall_term(logits, y)
        loss = loss + code_loss + 0.1 * F.cross_entropy(logits, pseudo)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        accuracy = (pseudo == y).float().mean()
    print(f"epoch {epoch}: loss {loss.item():.3f} accuracy {accuracy.item():.2f}")
