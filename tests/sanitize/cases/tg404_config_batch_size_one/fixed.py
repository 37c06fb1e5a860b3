# Modelled on GitHub huaifeng1993/DFANet#9 (https://github.com/huaifeng1993/DFANet/issues/9): a
# segmentation network's channel-attention block pools each feature map to 1x1 and normalizes it
# with BatchNorm2d; the training configuration sets a batch size of 1, so that BatchNorm sees one
# value per channel and raises "Expected more than 1 value per channel when training". The line
# to change is the configuration's batch size.
import torch
import torch.nn.functional as F
from torch import nn

config = {
    "lr": 0.01,
    "epochs": 1,
    "batch_size": 2,
    "samples": 8,
}


class Attention(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.gate = nn.Sequential(nn.Conv2d(ch, ch, 1, bias=False), nn.BatchNorm2d(ch),
                                  nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.pool(x))


class Trainer:
    def __init__(self, cfg: dict) -> None:
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), Attention(8), nn.Conv2d(8, 2, 1))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=cfg["lr"])
        data = torch.utils.data.TensorDataset(torch.randn(cfg["samples"], 3, 16, 16),
                                              torch.randint(0, 2, (cfg["samples"], 16, 16)))
        self.loader = torch.utils.data.DataLoader(data, batch_size=cfg["batch_size"], shuffle=True)
        self.epochs = cfg["epochs"]

    def train(self) -> None:
        for _ in range(self.epochs):
            for x, y in self.loader:
                loss = F.cross_entropy(self.net(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


torch.manual_seed(0)
Trainer(config).train()
print("trained")
