# Modelled on GitHub fastai/fastai#1352 (https://github.com/fastai/fastai/issues/1352): a model
# wrapped in nn.DataParallel fails after the first epoch with "Expected more than 1 value per
# channel when training"; the answer: the training loader did not use drop_last=True. Here each
# batch is split over four replicas by hand (tensor_split, run one after the other on the CPU):
# the loader drops the last batch of 5 that 101 samples in batches of 16 leave, so every shard
# holds 4 samples.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(2)
data = TensorDataset(torch.randn(101, 6), torch.randint(0, 2, (101,)))
loader = DataLoader(data, batch_size=16, shuffle=True,
                    drop_last=True)
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model.train()
for x, y in loader:
    optimizer.zero_grad()
    for xs, ys in zip(x.tensor_split(4), y.tensor_split(4)):
        F.cross_entropy(model(xs), ys).backward()
    optimizer.step()
