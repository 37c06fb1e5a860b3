# Modelled on GitHub open-mmlab/mmsegmentation#272
# (https://github.com/open-mmlab/mmsegmentation/issues/272): "Expected more than 1 value per channel
# when training, got input size torch.Size([1, 512, 1, 1])" from the image-pooling branch of an
# ASPP head; the answer was to set the batch size in the config above 1. Here the batches are
# drawn by index, with no DataLoader, and the config entry is the line to change.
import torch
from torch import nn

torch.manual_seed(2)

CFG = {
    "lr": 0.01,
    "batch_size": 1,  # expect: TG404
    "iters": 3,
}


class PoolingASPP(nn.Module):
    def __init__(self, ch: int = 16, n_cls: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU())
        self.image_pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(ch, ch, 1),
                                        nn.BatchNorm2d(ch), nn.ReLU())
        self.classify = nn.Conv2d(2 * ch, n_cls, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.stem(x)
        pooled = self.image_pool(f).expand_as(f)
        return self.classify(torch.cat([f, pooled], dim=1))


def train(cfg: dict, images: torch.Tensor, masks: torch.Tensor) -> None:
    model = PoolingASPP()
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    model.train()
    for _ in range(cfg["iters"]):
        idx = torch.randint(0, len(images), (cfg["batch_size"],))
        loss = nn.functional.cross_entropy(model(images[idx]), masks[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()


train(CFG, torch.randn(10, 3, 16, 16), torch.randint(0, 4, (10, 16, 16)))
