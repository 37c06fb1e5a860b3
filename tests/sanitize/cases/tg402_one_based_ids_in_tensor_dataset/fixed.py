# Report: https://github.com/tensorflow/models/issues/15
# Fixed twin: the sheet's 1-based stage numbers are shifted to class indices 0..4.
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
    stages = torch.tensor([SHEET[i % 5][1] - 1 for i in range(60)])
    loader = DataLoader(TensorDataset(windows, stages), batch_size=20, shuffle=True)
    StageTrainer(nn.Linear(30, len(SHEET)), loader).fit(epochs=2)


main()
