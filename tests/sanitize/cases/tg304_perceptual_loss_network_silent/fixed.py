# Report: https://github.com/wujiyang/Face_Pytorch/issues/10
# A correct look-alike of the margin-head report above (wujiyang/Face_Pytorch#10): a denoiser is
# trained with a perceptual loss module whose feature network is applied to the prediction and
# to the clean target and compared inside the module's call. Its feature network is a fixed
# random projection left with requires_grad (it is not meant to learn and no optimizer holds it);
# the loss compares two of its outputs, so it is a loss network, not a head left out.
import torch
import torch.nn.functional as F
from torch import nn


class PerceptualLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.features(prediction), self.features(target))


torch.manual_seed(0)
denoiser = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
criterion = PerceptualLoss()
optimizer = torch.optim.Adam(denoiser.parameters(), lr=1e-3)
clean = torch.rand(64, 1, 8, 8)
for epoch in range(3):
    for i in range(0, 64, 16):
        optimizer.zero_grad()
        noisy = clean[i:i + 16] + 0.1 * torch.randn(16, 1, 8, 8)
        loss = criterion(denoiser(noisy), clean[i:i + 16])
        loss.backward()
        optimizer.step()
print(f"loss {loss.item():.4f}")
