# Modelled on GitHub jacobgil/pytorch-grad-cam#187
# (https://github.com/jacobgil/pytorch-grad-cam/issues/187): a report script wraps its whole
# loop over images in torch.no_grad() for the predictions, and calls a gradient-based
# explanation inside that loop; the explanation's score.backward() then fails with "element 0
# of tensors does not require grad". The explanation call is the one to move out of the block.
import torch
from torch import nn

torch.manual_seed(0)


class InputSaliency:
    """|d score / d input| of one class score per sample."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __call__(self, images: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        images = images.clone().requires_grad_(True)
        score = self.model(images).gather(1, classes[:, None]).sum()
        score.backward()
        return images.grad.abs().amax(dim=1)


classifier = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5)).eval()
explain = InputSaliency(classifier)
pages = [torch.rand(2, 3, 12, 12) for _ in range(3)]

maps = []
with torch.no_grad():
    for page in pages:
        predicted = classifier(page).argmax(1)
        maps.append(explain(page, predicted))  # expect: TG204
print(f"{len(maps)} saliency maps, peak {max(m.max().item() for m in maps):.3f}")
