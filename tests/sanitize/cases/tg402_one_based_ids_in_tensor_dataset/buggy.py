# Report: https://github.com/tensorflow/models/issues/15
# Modelled on the report in tensorflow/models#15 ("I found my labels begin from 1 but not 0"):
# a sleep-stage classifier keeps its epochs and stage numbers in one TensorDataset; the stages
# are numbered 1..5 as the scoring sheet writes them, and a trainer class loops over the
# DataLoader. CrossEntropyLoss over 5 classes fails on stage 5 ("Target 5 is out of bounds").
# The labels are what to change, where the tensor is made, not the loss inside the trainer.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SHEET = [("W", 1), ("N1", 2), ("N2", 3), ("N3", 4), ("REM", 5)]


class StageTrainer:
    def __init__(self, net: nn.Module, loader: DataLoader) -> None:
        self.net, self.loader = net, loader
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
        self.loss_fn = nn.CrossEntropyLoss()

    def fit(self, epochs: int) -> None:
        for _ in range(epochs):
            for window, stage in self.loader:
                loss = self.loss_fn(self.net(window), stage)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


def main() -> None:
    torch.manual_seed(6)
    windows = torch.randn(60, 30)
    stages = torch.tensor([SHEET[i % 5][1] for i in range(60)])  # expect: TG402
    loader = DataLoader(TensorDataset(windows, stages), batch_size=20, shuffle=True)
    StageTrainer(nn.Linear(30, len(SHEET)), loader).fit(epochs=2)


main()
