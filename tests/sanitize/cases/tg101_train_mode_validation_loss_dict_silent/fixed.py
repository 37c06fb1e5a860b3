# Modelled on GitHub pytorch/vision#1350 ("Mask R-CNN: Dictionary of losses for the validation
# set", https://github.com/pytorch/vision/issues/1350) and maskrcnn-benchmark#785
# (https://github.com/facebookresearch/maskrcnn-benchmark/pull/785): a detector in torchvision's
# style returns its loss dict in training mode and its boxes in eval mode, so the validation
# step switches train mode on, under no_grad, to log validation losses. Its norm layers are
# frozen (fixed buffers) and it has no dropout: its forward's `if self.training:` only picks what
# to return, and two validation passes give the same losses. A correct program: silent.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(4)


class FrozenBatchNorm2d(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("weight", torch.ones(n))
        self.register_buffer("bias", torch.zeros(n))
        self.register_buffer("running_mean", torch.zeros(n))
        self.register_buffer("running_var", torch.ones(n))

    def forward(self, x):
        scale = self.weight * (self.running_var + 1e-5).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]


class BoxRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), FrozenBatchNorm2d(8), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, 4)

    def forward(self, images, targets=None):
        boxes = self.head(self.body(images).flatten(1))
        if self.training:
            return {"loss_center": F.smooth_l1_loss(boxes[:, :2], targets[:, :2]),
                    "loss_size": F.smooth_l1_loss(boxes[:, 2:], targets[:, 2:])}
        return boxes


class Module:
    def __init__(self):
        self.model = BoxRegressor()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def training_step(self, images, targets):
        self.model.train()
        loss = sum(self.model(images, targets).values())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def validation_step(self, images, targets):
        self.model.train(True)
        return {k: v.item() for k, v in self.model(images, targets).items()}


data = [(torch.randn(8, 1, 16, 16), torch.rand(8, 4)) for _ in range(4)]
module = Module()
for epoch in range(3):
    for images, targets in data[:3]:
        module.training_step(images, targets)
    first, second = module.validation_step(*data[3]), module.validation_step(*data[3])
    assert first == second
    print(f"epoch {epoch}: {first}")
