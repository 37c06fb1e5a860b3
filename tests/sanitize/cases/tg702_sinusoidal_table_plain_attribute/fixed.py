# Report: https://github.com/facebookresearch/fairseq/issues/4420
# Modelled on facebookresearch/fairseq#4420 ("Why sinusoidal positional embeddings are not moved
# to device automatically?"): a sinusoidal position table kept as a plain tensor attribute is not
# a parameter or a buffer, so model.to(device) would leave it behind; registered as a
# non-persistent buffer it moves with the model. The "meta" device stands in for "cuda" so that
# the case runs on any machine.
import math

import torch
from torch import nn


class SinusoidalPositions(nn.Module):
    def __init__(self, dim: int, max_len: int = 64) -> None:
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        freq = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        table = torch.zeros(max_len, dim)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.shape[1]]


class SequenceClassifier(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.positions = SinusoidalPositions(dim)
        layer = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.positions(self.embed(tokens))).mean(1))


def train(device: torch.device) -> None:
    model = SequenceClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        tokens = torch.randint(0, 50, (8, 12), device=device)
        labels = torch.randint(0, 3, (8,), device=device)
        loss = nn.functional.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
train(torch.device("meta"))
