# A model without Dropout or BatchNorm: its mode changes nothing.
import torch.nn as nn


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x)


def make_plain() -> nn.Module:
    return Plain()
