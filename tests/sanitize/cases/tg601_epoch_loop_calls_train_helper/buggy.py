# Modelled on the GitHub issue "set_epoch on DataLoader is needed for distributed training"
# (https://github.com/kan-bayashi/ParallelWaveGAN/issues/177): the epoch loop calls a train()
# helper that iterates a DataLoader over a shuffling DistributedSampler, and nothing calls
# sampler.set_epoch(epoch), so every epoch visits the samples in the same order.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, loader):
        self.loader = loader
        self.model = nn.GRU(3, 8, batch_first=True)
        self.head = nn.Linear(8, 1)
        params = [*self.model.parameters(), *self.head.parameters()]
        self.optimizer = torch.optim.Adam(params, lr=1e-3)

    def train(self):
        for x, y in self.loader:
            out, _ = self.model(x)
            loss = nn.functional.mse_loss(self.head(out[:, -1]).squeeze(-1), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def fit(self, epochs):
        for epoch in range(epochs):
            last = self.train()  # expect: TG601
        return last


torch.manual_seed(1)
data = TensorDataset(torch.randn(40, 5, 3), torch.randn(40))
sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True)
trainer = Trainer(DataLoader(data, batch_size=5, sampler=sampler))
print("loss", trainer.fit(3))
