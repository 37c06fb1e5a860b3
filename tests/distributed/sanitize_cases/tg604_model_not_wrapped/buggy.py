# Modelled on NCAR/miles-credit#153 (https://github.com/NCAR/miles-credit/pull/153: "the trainers
# remove the DDP wrapper from the model, leading to independent models on different GPUs that do not
# share gradient updates") and pytorch/pytorch#31771 (https://github.com/pytorch/pytorch/issues/31771:
# a DistributedSampler without set_epoch repeats its order every epoch). Each rank trains its own
# copy of the model on its own shard, and every epoch sees the same shuffle.
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(3):
    for x, y in loader:  # expect: TG601
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()  # expect: TG604
if dist.get_rank() == 0:
    print(f"loss {loss.item():.3f}")
dist.destroy_process_group()
