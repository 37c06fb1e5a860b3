# Modelled on GitHub maciej-sypetkowski/kaggle-rcic-1st#2
# (https://github.com/maciej-sypetkowski/kaggle-rcic-1st/issues/2): a memory-efficient DenseNet
# checkpoints each dense layer's bottleneck with torch.utils.checkpoint; with the reentrant
# implementation the checkpointed function runs under no_grad and, when none of its inputs
# requires grad (the first layer sees the raw images), its output has no grad_fn, so the first
# layer's parameters never train ("None of the inputs have requires_grad=True. Gradients will be
# None"). Here, a tiny dense block on random cell-image crops.
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

warnings.filterwarnings("ignore", message="None of the inputs")
torch.manual_seed(0)


class DenseLayer(nn.Module):
    def __init__(self, c_in: int, growth: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(c_in)
        self.conv = nn.Conv2d(c_in, growth, 3, padding=1)

    def bottleneck(self, *features: torch.Tensor) -> torch.Tensor:
        return self.conv(F.relu(self.norm(torch.cat(features, 1))))

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        return checkpoint(self.bottleneck, *features, use_reentrant=True)  # expect: TG205


class DenseNet(nn.Module):
    def __init__(self, growth: int = 4, classes: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DenseLayer(3 + i * growth, growth) for i in range(3)])
        self.head = nn.Linear(3 + 3 * growth, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return self.head(torch.cat(features, 1).mean((2, 3)))


model = DenseNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(6):
    images, labels = torch.randn(8, 3, 12, 12), torch.randint(0, 3, (8,))
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
