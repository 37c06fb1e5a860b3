# Report: https://github.com/luost26/DMRDenoise/issues/9
# Modelled on luost26/DMRDenoise#9 (where the score function's parameters meet the features in a
# point-cloud pooling layer): a pooling layer scores every point with a learnable layer and keeps
# the top-k points, but only the indices of the top-k scores are used, so the features it returns
# never depend on the scorer and the scorer's parameters never receive a gradient. The fixed twin
# gates the kept features with the scores, as the paper's pooling does.
import torch
from torch import nn


class ScorePool(nn.Module):
    def __init__(self, dim: int, keep: int) -> None:
        super().__init__()
        self.keep = keep
        self.score = nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.score(x).squeeze(-1)  # (batch, points)
        top, idx = s.topk(self.keep, dim=1)
        kept = torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        return kept * torch.sigmoid(top).unsqueeze(-1)


class Denoiser(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(3, 16), nn.ReLU())
        self.pool = ScorePool(16, keep=32)
        self.decode = nn.Linear(16, 3)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.decode(self.pool(self.encode(points)))


torch.manual_seed(1)
model = Denoiser()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(12):
    noisy = torch.randn(4, 64, 3)
    loss = (model(noisy) - noisy[:, :32]).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
