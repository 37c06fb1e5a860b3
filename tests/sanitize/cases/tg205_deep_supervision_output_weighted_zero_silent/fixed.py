# Near-miss, must stay silent. Modelled on MIC-DKFZ/nnUNet#1417 "Deep supervision loss using low
# resolution features." (https://github.com/MIC-DKFZ/nnUNet/issues/1417): with deep supervision
# the network returns one prediction per resolution, and version 1 gives the coarsest one a weight
# of 0, so the loss never reads it. The coarse head (and the stage only it uses) then never gets a
# gradient, on purpose: the model hands that output out intact and the loss code leaves it out.
# Here a 1D denoiser returns its predictions in a dict and the loss skips zero-weighted scales.
import torch
import torch.nn.functional as F
from torch import nn


class MultiScaleDenoiser(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv1d(1, 8, 5, padding=2)
        self.down = nn.Conv1d(8, 8, 4, stride=2, padding=1)
        self.deeper = nn.Conv1d(8, 8, 4, stride=2, padding=1)
        self.out_full = nn.Conv1d(8, 1, 1)
        self.out_half = nn.Conv1d(8, 1, 1)
        self.out_quarter = nn.Conv1d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> dict:
        full = torch.relu(self.stem(x))
        half = torch.relu(self.down(full))
        quarter = torch.relu(self.deeper(half))
        return {"full": self.out_full(full), "half": self.out_half(half),
                "quarter": self.out_quarter(quarter)}


scale_weights = {"full": 2 / 3, "half": 1 / 3, "quarter": 0.0}  # the coarsest is not used


def supervised_loss(preds: dict, clean: torch.Tensor) -> torch.Tensor:
    total = torch.zeros(())
    for key, weight in scale_weights.items():
        if weight == 0:
            continue
        target = F.adaptive_avg_pool1d(clean, preds[key].shape[-1])
        total = total + weight * F.mse_loss(preds[key], target)
    return total


torch.manual_seed(5)
net = MultiScaleDenoiser()
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
history = []
for step in range(12):
    clean = torch.sin(torch.linspace(0, 6, 64) * (1 + step % 3)).expand(6, 1, 64)
    noisy = clean + 0.3 * torch.randn(6, 1, 64)
    loss = supervised_loss(net(noisy), clean)
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append(loss.item())
print(f"loss {history[0]:.4f} -> {history[-1]:.4f}")
