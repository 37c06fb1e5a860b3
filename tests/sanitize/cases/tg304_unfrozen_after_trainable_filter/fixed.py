# Fixed twin of buggy.py: the unfrozen head is added to the optimizer as a parameter group.
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
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


model = Detector()
for p in model.box_head.parameters():
    p.requires_grad = False
optimizer = build_optimizer(model)
for it in range(60):
    if it == 10:
        for p in model.box_head.parameters():
            p.requires_grad = True
        optimizer.add_param_group({"params": list(model.box_head.parameters())})
    x = torch.randn(16, 12)
    loss = F.smooth_l1_loss(model(x), x[:, :4])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
