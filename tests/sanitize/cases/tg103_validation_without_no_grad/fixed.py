# Fixed twin of buggy.py (https://github.com/hszhao/semseg/issues/60): validation under no_grad.
# Near-miss that must stay silent: an eval-mode forward whose output a backward does reach
# (the gradient of the loss with respect to the input, as for a saliency map).
import torch
from torch import nn

torch.manual_seed(11)
model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 1))
images, masks = torch.randn(6, 1, 8, 8), torch.randint(0, 2, (6, 8, 8))
criterion = nn.CrossEntropyLoss()


def validate() -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, 6, 2):
            output = model(images[i:i + 2])
            total += criterion(output, masks[i:i + 2]).item()
    return total / 3


def saliency() -> torch.Tensor:
    model.eval()
    image = images[:1].clone().requires_grad_(True)
    loss = criterion(model(image), masks[:1])
    (grad,) = torch.autograd.grad(loss, image)
    return grad.abs().amax(dim=1)


print(validate(), saliency().shape)
