# Report: https://github.com/skhadem/3D-BoundingBox/issues/29
# Fixed twin: estimate() switches the orientation regressor to eval mode before running it, so
# the same crop gives the same orientation on every call. Must stay silent.
import torch
from torch import nn

torch.manual_seed(0)


class Orientation(nn.Module):
    def __init__(self, bins: int = 2) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                      nn.Flatten())
        self.orient = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.5),
                                    nn.Linear(32, bins * 2))
        self.conf = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(32, bins))
        self.dims = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor):
        f = self.features(x)
        cos_sin = self.orient(f).view(-1, self.conf[-1].out_features, 2)
        return nn.functional.normalize(cos_sin, dim=2), self.conf(f), self.dims(f)


@torch.no_grad()
def estimate(model: nn.Module, crop: torch.Tensor) -> tuple[float, list[float]]:
    model.eval()
    orient, conf, dims = model(crop)
    best = int(conf[0].argmax())
    cos, sin = orient[0, best].tolist()
    return float(torch.atan2(torch.tensor(sin), torch.tensor(cos))), dims[0].tolist()


model = Orientation()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
crops, angles = torch.randn(64, 3, 16, 16), torch.rand(64) * 6.28 - 3.14
model.train()
for epoch in range(2):
    for i in range(0, 64, 16):
        orient, conf, dims = model(crops[i:i + 16])
        target = torch.stack([angles[i:i + 16].cos(), angles[i:i + 16].sin()], 1)
        loss = (1 - (orient[:, 0] * target).sum(1)).mean() + dims.pow(2).mean()
        loss = loss + nn.functional.cross_entropy(conf, torch.zeros(16, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()

image = torch.randn(1, 3, 16, 16)
drawn_angle, drawn_dims = estimate(model, image)
logged_angle, _ = estimate(model, image)
print(f"drawn {drawn_angle:.3f} rad, logged {logged_angle:.3f} rad, dims {drawn_dims}")
