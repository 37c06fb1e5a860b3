# Modelled on kan-bayashi/ParallelWaveGAN#177 (https://github.com/kan-bayashi/ParallelWaveGAN/
# issues/177), "set_epoch on DataLoader is needed for distributed training": the epoch loop calls
# sampler.set_epoch(epoch) and then the training helper. To check that the reshuffle took effect,
# each epoch logs the head of the sampler's own order right after set_epoch, before the
# DataLoader's pass. That first look, before any DataLoader pass, is not an epoch: only the
# DataLoader's passes are, and each one follows a set_epoch. Must stay silent.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

torch.manual_seed(0)
data = TensorDataset(torch.randn(80, 5), torch.randn(80, 1))
sampler = DistributedSampler(data, num_replicas=2, rank=1, shuffle=True, seed=3)
loader = DataLoader(data, batch_size=10, sampler=sampler)
model = nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)


def train(loader):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


for epoch in range(3):
    sampler.set_epoch(epoch)
    head = [int(i) for i in iter(sampler)][:4]
    print(f"epoch {epoch}: order starts {head}, loss {train(loader):.4f}")
