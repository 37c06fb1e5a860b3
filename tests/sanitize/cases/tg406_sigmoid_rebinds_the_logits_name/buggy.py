# Modelled on itakurah/focal-loss-pytorch#5 (https://github.com/itakurah/focal-loss-pytorch/pull/5):
# "The binary_cross_entropy_with_logits will already apply a sigmoid. Doing the operation before
# applies the sigmoid twice ... the lowest score the model will see is 0.5". A soft-Dice plus BCE
# loss for multi-label tags turns its argument into probabilities under the same name
# (`preds = torch.sigmoid(preds)`), reads them for the Dice term, and hands that name to the
# with-logits loss as if it still held the logits. The raw scores are gone from the function once
# the name is rebound, so the rebinding is the line to change.
import torch
import torch.nn.functional as F
from torch import nn


class DiceBCELoss(nn.Module):
    def __init__(self, smooth=1.0):
        super().__init__()
        self.smooth = smooth

    def forward(self, preds, target):
        preds = torch.sigmoid(preds)  # expect: TG406
        inter = (preds * target).sum(0)
        dice = 1 - (2 * inter + self.smooth) / (preds.sum(0) + target.sum(0) + self.smooth)
        bce = F.binary_cross_entropy_with_logits(preds, target)
        return bce + dice.mean()


torch.manual_seed(0)
x, tags = torch.randn(128, 12), (torch.rand(128, 5) < 0.3).float()
tagger = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
criterion = DiceBCELoss()
opt = torch.optim.Adam(tagger.parameters(), lr=1e-2)
for step in range(25):
    for i in range(0, 128, 32):
        loss = criterion(tagger(x[i:i + 32]), tags[i:i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
