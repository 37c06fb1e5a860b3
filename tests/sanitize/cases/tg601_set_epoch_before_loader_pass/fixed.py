# Modelled on GitHub lucidrains/DALLE-pytorch#230
# (https://github.com/lucidrains/DALLE-pytorch/pull/230, train_dalle.py): the epoch loop keeps a
# few lists for its statistics, then iterates a DataLoader over a DistributedSampler without calling
# set_epoch, so every epoch sees the same order. set_epoch belongs at the start of the epoch, the
# first statement of the epoch loop's body, also when bookkeeping comes before the pass.
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.arange(48), torch.randn(48, 6))
sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True)
dl = DataLoader(data, batch_size=8, sampler=sampler)
net = nn.Linear(6, 1)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
orders = []
for epoch in range(3):
    seen = []
    losses = []
    sampler.set_epoch(epoch)
    for idx, x in dl:
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.extend(idx.tolist())
        losses.append(loss.item())
    orders.append(seen)
print("distinct epoch orders:", len({tuple(o) for o in orders}))
