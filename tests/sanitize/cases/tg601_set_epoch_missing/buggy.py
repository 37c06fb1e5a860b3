# Modelled on pytorch/pytorch#31771 "DistributedSampler can't shuffle the dataset"
# (https://github.com/pytorch/pytorch/issues/31771; also the set_epoch note in the
# DistributedSampler docs): the epoch loop iterates a DataLoader over a shuffling DistributedSampler
# without calling sampler.set_epoch(epoch), so each epoch sees the same order.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in loader:  # expect: TG601
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
print(f"loss {loss.item():.3f}")
