# Report: https://github.com/lyq133/LIC-HPCM/issues/4
# Modelled on lyq133/LIC-HPCM#4 ("Memory Leak in AverageMeter Prevents Per-Step VRAM Release"): a
# learned image-compression training loop keeps its rate-distortion loss in an AverageMeter built
# once per epoch and updates it with the loss tensor itself, so the meter's running sum chains
# every step's graph until the epoch ends. The fix passes loss.item() at the update call.
import torch
from torch import nn


class AverageMeter:
    def __init__(self) -> None:
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n: int = 1) -> None:
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class TinyCodec(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.g_a = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.GELU(), nn.Conv2d(8, 4, 3, 2, 1))
        self.g_s = nn.Sequential(nn.ConvTranspose2d(4, 8, 4, 2, 1), nn.GELU(),
                                 nn.ConvTranspose2d(8, 1, 4, 2, 1))

    def forward(self, x):
        y = self.g_a(x)
        y_hat = y + (torch.round(y) - y).detach()  # straight-through rounding
        return self.g_s(y_hat), y


def train_one_epoch(model, optimizer, batches, lmbda=0.01):
    loss_meter = AverageMeter()
    for x in batches:
        x_hat, y = model(x)
        loss = lmbda * 255 ** 2 * (x_hat - x).pow(2).mean() + y.abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_meter.update(loss.item(), x.size(0))
    return loss_meter.avg


torch.manual_seed(2)
codec = TinyCodec()
opt = torch.optim.Adam(codec.parameters(), lr=1e-3)
data = [torch.rand(4, 1, 16, 16) for _ in range(10)]
print("epoch loss", float(train_one_epoch(codec, opt, data)))
