# Modelled on facebookresearch/FixRes#9 (https://github.com/facebookresearch/FixRes/issues/9):
# fine-tuning at the test resolution puts the model in eval mode every epoch on purpose and
# switches only the last BatchNorm back to train(), "so that during fine-tuning the batch norm
# remains fixed except the last batch norm". The model is in a mixed mode set by the user's own
# calls, not left in eval mode by an evaluation. Must stay silent.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
net = nn.Sequential(backbone, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
last_bn, head = backbone[4], net[3]
for p in net.parameters():
    p.requires_grad = False
for p in [*last_bn.parameters(), *head.parameters()]:
    p.requires_grad = True
optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=1e-2)

for epoch in range(2):
    net.eval()
    last_bn.train()
    for step in range(4):
        images, labels = torch.randn(8, 3, 24, 24), torch.randint(0, 5, (8,))
        loss = F.cross_entropy(net(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    last_bn.eval()
    print(f"epoch {epoch}: loss {loss.item():.3f}")
