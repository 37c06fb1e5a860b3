# Modelled on GitHub Haian-Jin/TensoIR#12 (https://github.com/Haian-Jin/TensoIR/issues/12): only
# the normals (the gradient of the density) are taken inside torch.enable_grad(); the colors are
# computed after the block, under the renderer's torch.no_grad(), and carry no graph. A value
# that feeds the gradient inside the block, and one detached before it is kept, stay silent.
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
    colors, normals, opacities = [], [], []
    with torch.no_grad():
        for chunk in rays.split(64):
            with torch.enable_grad():
                pts = chunk.clone().requires_grad_(True)
                sigma, feat = field(pts)
                density = torch.relu(sigma)
                normal = -torch.autograd.grad(density.sum(), pts)[0]
                opacity = 1.0 - torch.exp(-sigma)
            opacities.append(opacity.detach())
            colors.append(torch.sigmoid(feat))
            normals.append(nn.functional.normalize(normal, dim=-1))
    return torch.cat(colors), torch.cat(normals), torch.cat(opacities)


field = Field()
optimizer = torch.optim.Adam(field.parameters(), lr=1e-3)
points, target = torch.randn(256, 3), torch.rand(256, 3)
for step in range(5):
    sigma, feat = field(points)
    loss = (torch.sigmoid(feat) - target).pow(2).mean() + 0.01 * sigma.abs().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
image, normal_map, alpha = render(field, torch.randn(192, 3))
print(image.shape, normal_map.shape, alpha.shape)
