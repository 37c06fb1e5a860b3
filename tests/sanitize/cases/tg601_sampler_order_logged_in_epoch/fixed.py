# Modelled on pytorch/pytorch#31771 (https://github.com/pytorch/pytorch/issues/31771), "each epoch
# samples the data in the same order": after adding set_epoch(epoch), the script checks the fix
# by logging the first indices of the sampler itself (list(sampler)) next to the DataLoader's
# pass. Those extra iterations are not epochs: only the DataLoader's passes are, and each one
# follows a set_epoch. Must stay silent.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

torch.manual_seed(0)
data = TensorDataset(torch.randn(96, 6), torch.randint(0, 2, (96,)))
sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=8, sampler=sampler)
model = nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: first indices {list(sampler)[:5]}, loss {loss.item():.3f}")
