# Modelled on GitHub open-mmlab/mmocr#884 (https://github.com/open-mmlab/mmocr/pull/884): a text
# detector's feature-pyramid neck adds each enhanced level into a running sum with `+=`; the sum
# starts as the first pass's outputs, which the next convolution saved for its backward, so the
# backward fails with "one of the variables needed for gradient computation has been modified by
# an inplace operation". The four sums must be written out of place.
import torch
import torch.nn.functional as F
from torch import nn


class Enhance(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(ch, ch, 3, padding=1) for _ in range(4))

    def forward(self, c2, c3, c4, c5):
        c4 = F.relu(self.convs[0](c4 + F.interpolate(c5, size=c4.shape[-2:])))
        c3 = F.relu(self.convs[1](c3 + F.interpolate(c4, size=c3.shape[-2:])))
        c2 = F.relu(self.convs[2](c2 + F.interpolate(c3, size=c2.shape[-2:])))
        c5 = F.relu(self.convs[3](c5 + F.avg_pool2d(c4, 2)))
        return c2, c3, c4, c5


class Neck(nn.Module):
    def __init__(self, ch: int = 8, passes: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Enhance(ch) for _ in range(passes))

    def forward(self, c2, c3, c4, c5):
        for i, block in enumerate(self.blocks):
            c2, c3, c4, c5 = block(c2, c3, c4, c5)
            if i == 0:
                s2, s3, s4, s5 = c2, c3, c4, c5
            else:
                s2 += c2  # expect: TG207
                s3 += c3
                s4 += c4
                s5 += c5
        return s2 + F.interpolate(s3, size=s2.shape[-2:]) + F.interpolate(s4, size=s2.shape[-2:]) \
            + F.interpolate(s5, size=s2.shape[-2:])


torch.manual_seed(0)
neck = Neck()
opt = torch.optim.SGD(neck.parameters(), lr=0.01)
feats = [torch.randn(2, 8, s, s) for s in (16, 8, 4, 2)]
loss = neck(*feats).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
print("trained")
