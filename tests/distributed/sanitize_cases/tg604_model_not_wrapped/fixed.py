# Modelled on NCAR/miles-credit#153 (https://github.com/NCAR/miles-credit/pull/153: "the trainers
# remove the DDP wrapper from the model, leading to independent models on different GPUs that do not
# share gradient updates") and pytorch/pytorch#31771 (https://github.com/pytorch/pytorch/issues/31771:
# a DistributedSampler without set_epoch repeats its order every epoch). Fixed twin: the model is
# wrapped in DistributedDataParallel and the sampler's epoch is set every epoch; the evaluation
# sampler (shuffle=False) needs no set_epoch. At the end rank 0 alone loads the best epoch's weights
# for a final test and prints: parameters changed on one rank after training are not divergence.
import copy

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())  # different on purpose: DDP broadcasts rank 0's weights
data = TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    if epoch == 1:
        best = copy.deepcopy(model.module.state_dict())
val_loader = DataLoader(data, batch_size=64, sampler=DistributedSampler(data, shuffle=False))
model.eval()
with torch.no_grad():
    for epoch in range(2):
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in val_loader)
if dist.get_rank() == 0:
    model.module.load_state_dict(best)
    with torch.no_grad():
        test_loss = nn.functional.cross_entropy(model.module(data.tensors[0]), data.tensors[1])
    print(f"loss {loss.item():.3f} correct {correct} test loss {test_loss.item():.3f}")
dist.destroy_process_group()
