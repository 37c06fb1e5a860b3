# Report: https://github.com/XingangPan/deep-generative-prior/issues/8
# Deep generative prior restores one image by fine-tuning a pretrained generator with its BatchNorm
# layers in eval mode on purpose: a batch of one image has no usable batch statistics, so the
# pretrained running statistics are kept (the authors confirm it in the issue). The generator was
# trained in train mode before; eval() is called, then the fine-tuning optimizer is built and
# every one of its steps runs in eval mode. Nothing left the model in eval mode by accident.
import torch
from torch import nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, nz: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(nz, 16 * 2 * 2)
        self.net = nn.Sequential(nn.BatchNorm2d(16), nn.ReLU(),
                                 nn.ConvTranspose2d(16, 1, 4, 2, 1), nn.Tanh())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.fc(z).view(-1, 16, 2, 2))


def pretrain(G: Generator, images: torch.Tensor) -> None:
    opt = torch.optim.Adam(G.parameters(), lr=1e-2)
    G.train()
    for _ in range(10):
        z = torch.randn(len(images), 8)
        loss = F.mse_loss(G(z), images)
        opt.zero_grad()
        loss.backward()
        opt.step()


def restore(G: Generator, degraded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    z = torch.randn(1, 8, requires_grad=True)
    G.eval()  # keep the pretrained BatchNorm statistics: one image cannot provide them
    opt = torch.optim.Adam([{"params": [z], "lr": 5e-2}, {"params": G.parameters(), "lr": 1e-3}])
    for _ in range(12):
        loss = F.mse_loss(G(z) * mask, degraded * mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return G(z)


torch.manual_seed(0)
G = Generator()
images = torch.rand(16, 1, 4, 4) * 2 - 1
pretrain(G, images)
mask = torch.ones(1, 1, 4, 4)
mask[..., 1:3, 1:3] = 0
restored = restore(G, images[:1] * mask, mask)
