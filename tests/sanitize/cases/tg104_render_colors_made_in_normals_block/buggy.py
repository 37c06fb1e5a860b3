# Modelled on GitHub Haian-Jin/TensoIR#12 (https://github.com/Haian-Jin/TensoIR/issues/12): an
# evaluation renderer runs under torch.no_grad() and re-enables grad with torch.enable_grad() to
# take normals as the gradient of the density; the colors are computed inside the same block, so
# every rendered chunk leaves it carrying a grad_fn and the collected image keeps graphs that no
# gradient ever uses (more memory than the renderer needs). Here, a tiny radiance field.
import torch
from torch import nn

torch.manual_seed(5)


class Field(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(3, 32), nn.Softplus())
        self.sigma = nn.Linear(32, 1)
        self.color = nn.Linear(32, 3)

    def forward(self, pts):
        h = self.trunk(pts)
        return self.sigma(h).squeeze(-1), self.color(h)


def render(field, rays):
    colors, normals = [], []
    with torch.no_grad():
        for chunk in rays.split(64):
            with torch.enable_grad():
                pts = chunk.clone().requires_grad_(True)
                sigma, feat = field(pts)
                normal = -torch.autograd.grad(sigma.sum(), pts)[0]
                rgb = torch.sigmoid(feat)  # expect: TG104
            colors.append(rgb)
            normals.append(nn.functional.normalize(normal, dim=-1))
    return torch.cat(colors), torch.cat(normals)


field = Field()
optimizer = torch.optim.Adam(field.parameters(), lr=1e-3)
points, target = torch.randn(256, 3), torch.rand(256, 3)
for step in range(5):
    sigma, feat = field(points)
    loss = (torch.sigmoid(feat) - target).pow(2).mean() + 0.01 * sigma.abs().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
image, normal_map = render(field, torch.randn(192, 3))
print(image.shape, normal_map.shape)
