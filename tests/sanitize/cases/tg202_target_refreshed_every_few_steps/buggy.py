# Modelled on the PyTorch forum thread "Backpropagation - Graph is reused while it shouldn't"
# (https://discuss.pytorch.org/t/backpropagation-graph-is-reused-while-it-shouldnt/24554): a
# value is computed once and reused by later iterations to save recomputing it, and the second
# iteration's backward runs into the graph the first one freed. Here the reused value is a set of
# class prototypes, embedded by the encoder being trained and refreshed only every few steps;
# the refresh keeps the graph of that call, so the step after it fails ("Trying to backward
# through the graph a second time"). The prototypes are targets: made without a graph.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)
encoder = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 8))
opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
support = torch.randn(5, 10)  # one example per class
queries, labels = torch.randn(64, 10), torch.randint(0, 5, (64,))

prototypes = None
for step in range(8):
    if step % 4 == 0:
        prototypes = encoder(support)  # expect: TG202
    idx = torch.randint(0, 64, (16,))
    logits = -torch.cdist(encoder(queries[idx]), prototypes)
    loss = F.cross_entropy(logits, labels[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
