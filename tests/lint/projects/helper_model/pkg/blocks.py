# A block with BatchNorm, two imports away from the scripts that build the model.
import torch.nn as nn


class Block(nn.Sequential):
    def __init__(self, width: int) -> None:
        super().__init__(nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU())
