# Modelled on https://github.com/pytorch/pytorch/issues/3814 ("Scheduler should step after the end
# of each epoch, not after every iteration") and https://github.com/ivadomed/ivadomed/pull/55 (the
# scheduler "incorrectly stepped in the batch loop instead of in the epoch loop"), written as
# notebook cells: a node classifier on a small graph trained on shuffled node mini-batches sliced
# by hand (no DataLoader), with an ExponentialLR(gamma=0.7) meant per epoch stepped after every
# mini-batch. Epochs are 8 optimizer steps, so the rate falls by about 17x per epoch and the
# second epoch trains at under 1% of it. Fixed: the schedule steps once per epoch.

# %% data: a ring graph with features and a label per node
import torch
from torch import nn

torch.manual_seed(0)
nodes = 128
features = torch.randn(nodes, 16)
labels = (features[:, 0] > 0).long()
ring = torch.arange(nodes)
adjacency = torch.zeros(nodes, nodes)
adjacency[ring, (ring + 1) % nodes] = adjacency[(ring + 1) % nodes, ring] = 1.0
adjacency += torch.eye(nodes)
adjacency /= adjacency.sum(1, keepdim=True)

# %% model: one propagation step, then a linear head
class Propagate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 32)
        self.head = nn.Linear(32, 2)

    def forward(self, x, adj):
        return self.head(torch.relu(adj @ self.lin(x)))


net = Propagate()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.7)

# %% train on node mini-batches of 16
for epoch in range(4):
    net.train()
    order = torch.randperm(nodes)
    for start in range(0, nodes, 16):
        batch = order[start:start + 16]
        optimizer.zero_grad()
        logits = net(features, adjacency)[batch]
        nn.functional.cross_entropy(logits, labels[batch]).backward()
        optimizer.step()
    decay.step()
    net.eval()
    with torch.no_grad():
        accuracy = (net(features, adjacency).argmax(1) == labels).float().mean().item()
    print(f"epoch {epoch}: lr {decay.get_last_lr()[0]:.2e} accuracy {accuracy:.3f}")
