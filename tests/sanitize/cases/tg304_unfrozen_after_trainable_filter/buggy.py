# Modelled on https://github.com/ucbdrive/few-shot-object-detection/issues/16 (a detector's box
# head frozen for the first iterations, then unfrozen by setting requires_grad): the optimizer was
# built from the parameters that required grad at the time, so the unfrozen head receives
# gradients and never changes. The line that picked the parameters is reported.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
        self.box_head = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.box_head(self.backbone(x))


def build_optimizer(model):
    params = [p for p in model.parameters() if p.requires_grad]  # expect: TG304
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


model = Detector()
for p in model.box_head.parameters():
    p.requires_grad = False
optimizer = build_optimizer(model)
for it in range(60):
    if it == 10:
        for p in model.box_head.parameters():
            p.requires_grad = True
    x = torch.randn(16, 12)
    loss = F.smooth_l1_loss(model(x), x[:, :4])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
