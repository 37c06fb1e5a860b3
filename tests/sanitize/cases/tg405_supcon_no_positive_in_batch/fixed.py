# Modelled on GitHub HobbitLong/SupContrast#50 (https://github.com/HobbitLong/SupContrast/issues/50):
# a supervised contrastive loss averages each anchor's log-probabilities over its positives,
# dividing by mask.sum(1); an anchor whose class appears once in the batch has no positive, the
# division is 0/0, and the loss is NaN. Here, functions: an encoder of tabular features trained
# with that loss on batches where some classes appear only once.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(7)


def supcon_loss(features, labels, temperature=0.1):
    features = F.normalize(features, dim=1)
    logits = features @ features.T / temperature
    self_mask = torch.eye(len(labels), dtype=torch.bool)
    logits = logits.masked_fill(self_mask, -1e9)
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    positives = (labels[:, None] == labels[None, :]) & ~self_mask
    mean_log_prob_pos = (positives * log_prob).sum(1) / positives.sum(1).clamp_min(1)
    return -mean_log_prob_pos.mean()


def make_batch(n=12):
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6])[:n]
    return torch.randn(n, 10) + labels[:, None].float(), labels


def train(encoder, steps=4):
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.05)
    for step in range(steps):
        x, y = make_batch()
        loss = supcon_loss(encoder(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.3f}")


train(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8)))
