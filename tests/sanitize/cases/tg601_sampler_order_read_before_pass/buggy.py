# Modelled on lucidrains/DALLE-pytorch#230 (https://github.com/lucidrains/DALLE-pytorch/pull/230),
# "use data_sampler.set_epoch to avoid having the same order in each epoch": the epoch loop never
# calls set_epoch. Each epoch first logs the head of the sampler's order for this rank's shard,
# then trains on the DataLoader. set_epoch belongs above that log line: the order it reads is
# this epoch's order too, so the finding goes there, not to the pass below it.
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
    shard_head = [int(i) for i in sampler][:4]  # expect: TG601
    model.train()
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: shard starts {shard_head}, loss {loss.item():.4f}")
