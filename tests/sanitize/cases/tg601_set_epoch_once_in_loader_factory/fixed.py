# Fixed twin of buggy.py (https://github.com/LambdaLabsML/distributed-training-guide/issues/40):
# the factory only builds the loader; the epoch loop calls set_epoch(epoch) before each pass.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_loader(features, targets):
    shard = DistributedSampler(TensorDataset(features, targets), num_replicas=2, rank=1,
                               shuffle=True, seed=7)
    return DataLoader(shard.dataset, batch_size=6, sampler=shard)


torch.manual_seed(3)
loader = make_loader(torch.randn(60, 4), torch.randn(60, 1))
regressor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
sgd = torch.optim.SGD(regressor.parameters(), lr=0.05)
epoch, history = 0, []
while epoch < 3:
    loader.sampler.set_epoch(epoch)
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
