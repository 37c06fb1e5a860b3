# Report: https://github.com/Sanster/IOPaint/pull/7
# Modelled on Sanster/IOPaint#7 ("set eval mode during inference + don't store gradients"): an
# inpainting model's own inference method switched the network to eval mode but ran it with
# autograd on, so every request kept the activations of the whole network. Here a tiny masked
# image filler is fitted, then a batch of requests goes through its fill() method, which calls
# self.eval() and runs its encoder and decoder with grad enabled; the results are kept in a list.
# The fix decorates fill() with @torch.no_grad(), so the finding belongs on its definition.
import torch
import torch.nn.functional as F
from torch import nn


class HoleFiller(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.ReLU())
        self.decoder = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(torch.cat([image * (1 - mask), mask], 1)))

    def fill(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # expect: TG103
        self.eval()
        guess = self.decoder(self.encoder(torch.cat([image * (1 - mask), mask], 1)))
        return image * (1 - mask) + guess * mask


torch.manual_seed(4)
filler = HoleFiller()
opt = torch.optim.Adam(filler.parameters(), lr=1e-2)
for _ in range(5):
    image = torch.rand(4, 1, 12, 12)
    mask = (torch.rand(4, 1, 12, 12) > 0.8).float()
    loss = F.mse_loss(filler(image, mask) * mask, image * mask)
    opt.zero_grad()
    loss.backward()
    opt.step()

filled = []
for request in range(3):
    image = torch.rand(2, 1, 12, 12)
    filled.append(filler.fill(image, (image > 0.9).float()))
print([round(float(x.mean()), 3) for x in filled])
