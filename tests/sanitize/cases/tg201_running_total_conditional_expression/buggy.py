# Report: https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory
# Modelled on the PyTorch FAQ's "accumulating history across your training loop", written the way
# a trainer class that starts its running total at None does it: the first batch's loss becomes
# the total and every later one is added to it, so the total is a tensor whose graph reaches every
# step of the epoch. The sum is only read once per epoch, for the log line.
import torch
from torch import nn


class Trainer:
    def __init__(self) -> None:
        torch.manual_seed(5)
        self.model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.batches = [(torch.randn(16, 12), torch.randn(16, 1)) for _ in range(24)]

    def train_epoch(self) -> float:
        total = None
        for x, y in self.batches:
            loss = nn.functional.mse_loss(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total = loss if total is None else total + loss  # expect: TG201
        return float(total) / len(self.batches)


trainer = Trainer()
for epoch in range(2):
    print(f"epoch {epoch}: mean loss {trainer.train_epoch():.4f}")
