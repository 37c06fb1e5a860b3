# Modelled on yhenon/pytorch-retinanet#109 (https://github.com/yhenon/pytorch-retinanet/issues/109):
# fine-tuning a pretrained detector with a batch too small for BatchNorm, the BatchNorm layers are
# put back in eval mode after model.train() (their weight and bias still require grad), and the
# optimizer is built from a list that leaves every BatchNorm parameter out, by name. Those
# parameters receive gradients that no optimizer uses: wasted work, chosen. Here the filtered list
# is drawn from the backbone only, so the head is never given to the optimizer: it never learns.
import torch
import torch.nn.functional as F
from torch import nn


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential()
        self.backbone.add_module("conv1", nn.Conv2d(3, 8, 3, padding=1))
        self.backbone.add_module("bn1", nn.BatchNorm2d(8))
        self.backbone.add_module("relu", nn.ReLU())
        self.backbone.add_module("conv2", nn.Conv2d(8, 16, 3, stride=2, padding=1))
        self.backbone.add_module("bn2", nn.BatchNorm2d(16))
        self.head = nn.Conv2d(16, 5, 1)  # 4 box offsets and a score per cell

    def forward(self, images):
        return self.head(F.relu(self.backbone(images)))

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()


torch.manual_seed(0)
model = TinyDetector()
optimizer = torch.optim.SGD(  # expect: TG304
    [p for n, p in model.backbone.named_parameters() if "bn" not in n], lr=0.01, momentum=0.9)
for it in range(12):
    images, targets = torch.randn(2, 3, 16, 16), torch.randn(2, 5, 8, 8)
    model.train()
    model.freeze_bn()
    loss = F.smooth_l1_loss(model(images), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"last loss {loss.item():.4f}")
