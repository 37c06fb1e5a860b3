# Fixed twin of buggy.py, modelled on lucidrains/DALLE-pytorch#230
# (https://github.com/lucidrains/DALLE-pytorch/pull/230): set_epoch(epoch) at the top of every
# epoch, before the order is logged and the DataLoader iterated. Must stay silent.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

torch.manual_seed(0)
data = TensorDataset(torch.randn(72, 5), torch.randn(72, 1))
sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=1)
loader = DataLoader(data, batch_size=9, sampler=sampler)
model = nn.Linear(5, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    sampler.set_epoch(epoch)
    shard_head = [int(i) for i in sampler][:4]
    model.train()
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: shard starts {shard_head}, loss {loss.item():.4f}")
