# Modelled on the GitHub issue "Set shuffle & seed for DistributedSampler. Call set_epoch in loop"
# (https://github.com/LambdaLabsML/distributed-training-guide/issues/40): a factory builds the
# loader and seeds its DistributedSampler with set_epoch(start_epoch) once, at setup. The epoch
# loop never calls it again, so the sampler keeps that epoch and every epoch replays one order.
# The call to change is the one in the factory: set_epoch belongs in the loop, with its epoch.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_loader(features, targets, start_epoch):
    shard = DistributedSampler(TensorDataset(features, targets), num_replicas=2, rank=1,
                               shuffle=True, seed=7)
    shard.set_epoch(start_epoch)  # expect: TG601
    return DataLoader(shard.dataset, batch_size=6, sampler=shard)


torch.manual_seed(3)
loader = make_loader(torch.randn(60, 4), torch.randn(60, 1), start_epoch=0)
regressor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
sgd = torch.optim.SGD(regressor.parameters(), lr=0.05)
epoch, history = 0, []
while epoch < 3:
    running = 0.0
    for xb, yb in loader:
        sgd.zero_grad()
        loss = nn.functional.smooth_l1_loss(regressor(xb), yb)
        loss.backward()
        sgd.step()
        running += loss.item()
    history.append(round(running, 4))
    epoch += 1
print("epoch losses:", history)
