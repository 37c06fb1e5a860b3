# Report: https://github.com/Zhen-Dong/Magic-Me/issues/14
# Modelled on Zhen-Dong/Magic-Me#14 ("loss.sum(...) / masks.sum(...)": NaN once a mask sums to
# 0). A config-driven keypoint regressor averages its per-sample L1 error over the visible
# keypoints with a masked-mean loss whose epsilon comes from the config; the fixed twin's config
# gives it a positive value, so a crop with no visible keypoint scores 0.
import torch
from torch import nn

CONFIG = {"lr": 1e-2, "eps": 1e-6, "steps": 3, "keypoints": 5}


class MaskedMeanL1(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, pred, target, visible):
        error = ((pred - target).abs().sum(-1) * visible).sum(1)
        per_sample = error / (visible.sum(1) + self.eps)
        return per_sample.mean()


torch.manual_seed(0)
k = CONFIG["keypoints"]
net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, k * 2), nn.Unflatten(1, (k, 2)))
criterion = MaskedMeanL1(eps=CONFIG["eps"])
opt = torch.optim.Adam(net.parameters(), lr=CONFIG["lr"])
for step in range(CONFIG["steps"]):
    crops = torch.randn(4, 16)
    coords = torch.rand(4, k, 2)
    visible = (torch.rand(4, k) > 0.3).float()
    visible[step % 4] = 0.0  # a crop where every keypoint is occluded
    loss = criterion(net(crops), coords, visible)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} masked l1 {loss.item():.4f}")
