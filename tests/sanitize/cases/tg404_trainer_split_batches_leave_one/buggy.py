# Report: https://github.com/chaosparrot/parrot.py/pull/73
# Modelled on chaosparrot/parrot.py#73 ("1537 training rows -> [512][512][512][1] dies"): rows
# cut into batches by hand leave a last batch of one, and the BatchNorm layer refuses it in
# training mode. Here a trainer class splits a shuffled index into chunks with Tensor.split before
# looping over them; 97 rows in chunks of 32 end with a chunk of one.
import torch
from torch import nn

torch.manual_seed(0)


class SensorTrainer:
    def __init__(self, x, y, batch_size=32):
        self.x, self.y, self.batch_size = x, y, batch_size
        self.net = nn.Sequential(nn.Linear(6, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 3))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, xb, yb):
        loss = nn.functional.cross_entropy(self.net(xb), yb)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    def epoch(self):
        self.net.train()
        chunks = torch.randperm(len(self.x)).split(self.batch_size)  # expect: TG404
        for idx in chunks:
            last = self.step(self.x[idx], self.y[idx])
        return last


readings = torch.randn(97, 6)
labels = (readings[:, 0] > 0).long() + (readings[:, 1] > 1).long()
trainer = SensorTrainer(readings, labels)
for epoch in range(2):
    print(f"epoch {epoch}: loss {trainer.epoch():.4f}")
