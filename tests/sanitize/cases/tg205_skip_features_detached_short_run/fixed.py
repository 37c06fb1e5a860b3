# Modelled on GitHub PRBonn/bonnetal#35 (https://github.com/PRBonn/bonnetal/issues/35, "some skip
# layers no grad in segmentation ... it is x.detach()"): the features a decoder takes from an
# encoder stage through a skip connection are detached where they are stored, so the skip
# projection's parameters, though given to the optimizer, never receive a gradient. The script is
# a 3-step smoke test: the run ends at the step where the gradients are first judged.
import torch
import torch.nn.functional as F
from torch import nn


class SkipSegNet(nn.Module):
    def __init__(self, n_cls: int = 3) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.skip_proj = nn.Conv2d(8, 16, 1)
        self.head = nn.Conv2d(16, n_cls, 1)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        low = F.relu(self.stem(img))
        skip = self.skip_proj(low)
        deep = F.interpolate(F.relu(self.down(low)), scale_factor=2.0, mode="nearest")
        return self.head(deep + skip)


torch.manual_seed(5)
net = SkipSegNet()
opt = torch.optim.SGD(net.parameters(), lr=0.05)
img, mask = torch.randn(2, 3, 16, 16), torch.randint(0, 3, (2, 16, 16))
for step in range(3):
    opt.zero_grad()
    loss = F.cross_entropy(net(img), mask)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
