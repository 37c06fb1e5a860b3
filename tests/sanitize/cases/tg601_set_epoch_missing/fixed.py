# Modelled on pytorch/pytorch#31771 "DistributedSampler can't shuffle the dataset"
# (https://github.com/pytorch/pytorch/issues/31771; also the set_epoch note in the
# DistributedSampler docs): the epoch loop iterates a DataLoader over a shuffling DistributedSampler
# without calling sampler.set_epoch(epoch), so each epoch sees the same order. Fixed twin: set_epoch
# each epoch; the validation sampler (shuffle=False) never needs it.
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
    sampler.set_epoch(epoch)
    for x, y in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
val_sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=False)
val_loader = DataLoader(data, batch_size=32, sampler=val_sampler)
model.eval()
with torch.no_grad():
    for epoch in range(2):
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in val_loader)
print(f"loss {loss.item():.3f} correct {correct}")
