# Look-alike for TG102, modelled on isht7/pytorch-deeplab-resnet#15
# (https://github.com/isht7/pytorch-deeplab-resnet/issues/15): "The model is trained in eval mode"
# on purpose; the BatchNorm layers' weight and bias are fixed with requires_grad = False, and
# eval mode keeps their running mean and variance fixed too. The network has no Dropout, so eval
# mode changes nothing else: every norm layer is frozen whole, which is what the author wants.
import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(cin, cout, dilation=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class SegNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 8), conv_bn(8, 8, dilation=2))
        self.classifier = nn.Conv2d(8, classes, 1)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                for p in m.parameters():
                    p.requires_grad = False

    def forward(self, x):
        return self.classifier(self.features(x))


torch.manual_seed(0)
net = SegNet()
optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, net.parameters()), lr=0.01)
net.eval()
for step in range(6):
    images, masks = torch.randn(4, 3, 16, 16), torch.randint(0, 3, (4, 16, 16))
    loss = F.cross_entropy(net(images), masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
