"""Models trainguard can build by name: a small CNN that adapts to the input and an MLP.

``build_model(name, input_shape=(C, H, W), num_classes=K)``; add your own with
:func:`register_model`, or pass any ``nn.Module`` to :func:`trainguard.fit`.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from trainguard.errors import UsageError

__all__ = ["SmallCNN", "MLP", "build_model", "register_model", "MODELS"]


class SmallCNN(nn.Module):
    """Two or three conv blocks (conv 3x3, BatchNorm, ReLU, 2x2 max-pool when the map is large
    enough), global average pooling, dropout and a linear classifier.

    Args:
        in_channels: ``C`` of the input.
        num_classes: ``K``, the number of output logits.
        image_size: ``(H, W)``; decides how many blocks pool (maps stay >= 2x2).
        width: channels of the first block (doubled per block).
        dropout: dropout probability before the classifier.

    Shape:
        - Input: ``(N, C, H, W)``
        - Output: ``(N, K)`` logits
    """

    def __init__(self, in_channels: int, num_classes: int, *, image_size: tuple[int, int] = (8, 8),
                 width: int = 32, dropout: float = 0.1) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels, (h, w) = in_channels, image_size
        blocks = 3 if min(h, w) >= 16 else 2
        for i in range(blocks):
            out = width * 2**i
            layers += [nn.Conv2d(channels, out, 3, padding=1, bias=False), nn.BatchNorm2d(out),
                       nn.ReLU(inplace=True)]
            if min(h, w) >= 4:
                layers.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            channels = out
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x)).flatten(1)
        return self.classifier(self.dropout(x))


class MLP(nn.Module):
    """Flatten, one hidden ReLU layer, linear output.

    Shape:
        - Input: ``(N, *)`` with ``prod(*) == in_features``
        - Output: ``(N, K)`` logits
    """

    def __init__(self, in_features: int, num_classes: int, *, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(),
                                 nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


Builder = Callable[[tuple[int, int, int], int], nn.Module]

MODELS: dict[str, Builder] = {
    "cnn": lambda shape, k: SmallCNN(shape[0], k, image_size=(shape[1], shape[2])),
    "mlp": lambda shape, k: MLP(shape[0] * shape[1] * shape[2], k),
}


def register_model(name: str, builder: Builder) -> None:
    """Make ``builder(input_shape, num_classes) -> nn.Module`` available as ``--model name``."""
    MODELS[name] = builder


def build_model(name: str, *, input_shape: tuple[int, int, int], num_classes: int) -> nn.Module:
    """Build a registered model.

    Raises:
        UsageError: no model of that name.
    """
    if name not in MODELS:
        raise UsageError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name](input_shape, num_classes)
