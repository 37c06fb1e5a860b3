# Modelled on GitHub hszhao/semseg#60 (https://github.com/hszhao/semseg/issues/60): validation
# switches to eval mode but computes the forward with grad enabled, so each batch builds a graph
# that is never used (and runs out of memory on large inputs). validate() does nothing but
# evaluate, so the finding sits on its def, where `@torch.no_grad()` goes.
import torch
from torch import nn

torch.manual_seed(11)
model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 1))
images, masks = torch.randn(6, 1, 8, 8), torch.randint(0, 2, (6, 8, 8))
criterion = nn.CrossEntropyLoss()


def validate() -> float:  # expect: TG103
    model.eval()
    total = 0.0
    for i in range(0, 6, 2):
        output = model(images[i:i + 2])
        total += criterion(output, masks[i:i + 2]).item()
    return total / 3


print(validate())
