# Modelled on ifzhang/FairMOT#19 "Multitask learning with uncertainty?"
# (https://github.com/ifzhang/FairMOT/issues/19): the loss module weighs the detection and
# re-identification losses with learned log-variances (Kendall et al., "Multi-Task Learning Using
# Uncertainty to Weigh Losses", https://arxiv.org/abs/1705.07115), but the optimizer is built over
# the model only, so the weights get gradients and never change.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.box = nn.Linear(32, 4)
        self.ident = nn.Linear(32, 5)

    def forward(self, x):
        h = self.trunk(x)
        return self.box(h), self.ident(h)


class UncertaintyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.s_det = nn.Parameter(torch.tensor(-1.85))
        self.s_id = nn.Parameter(torch.tensor(-1.05))

    def forward(self, outputs, boxes, ids):
        det_loss = F.l1_loss(outputs[0], boxes)
        id_loss = F.cross_entropy(outputs[1], ids)
        return 0.5 * (torch.exp(-self.s_det) * det_loss + torch.exp(-self.s_id) * id_loss
                      + self.s_det + self.s_id)


model, criterion = TwoHeads(), UncertaintyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # expect: TG304
for step in range(30):
    x = torch.randn(16, 10)
    boxes, ids = torch.randn(16, 4), torch.randint(0, 5, (16,))
    loss = criterion(model(x), boxes, ids)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(round(criterion.s_det.item(), 3), round(criterion.s_id.item(), 3))
