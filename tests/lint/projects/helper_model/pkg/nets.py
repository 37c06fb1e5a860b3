import torch.nn as nn

from .blocks import Block


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.block = Block(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.block(self.stem(x)))
