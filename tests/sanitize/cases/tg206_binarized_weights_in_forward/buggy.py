# Modelled on GitHub eladhoffer/quantized.pytorch#12
# (https://github.com/eladhoffer/quantized.pytorch/issues/12) and
# ZLkanyo009/STBP-train-and-compression#1: a binarized layer overwrites its own weight through
# `.data` in forward, so every forward throws away the small updates the optimizer just made to
# the real-valued weight (BinaryConnect keeps the latent weight and passes gradients straight
# through the sign instead).
import torch
import torch.nn.functional as F
from torch import nn


class BinaryLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.weight.data = torch.sign(self.weight.data)  # expect: TG206
        w = self.weight
        return F.linear(x, w, self.bias)


def make_model() -> nn.Module:
    return nn.Sequential(BinaryLinear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), BinaryLinear(32, 2))


def train(model: nn.Module, steps: int) -> float:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = torch.zeros(())
    for _ in range(steps):
        x = torch.randn(32, 12)
        y = (x[:, 0] > 0).long()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


torch.manual_seed(4)
print(f"last loss {train(make_model(), 12):.3f}")
