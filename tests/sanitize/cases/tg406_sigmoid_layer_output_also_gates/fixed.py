# Report: https://github.com/Turoad/lanedet/issues/32
# Modelled on GitHub Turoad/lanedet#32 ("it seems that the sigmoid function used twice"): a lane
# net's existence head ends in an nn.Sigmoid layer whose probabilities also weight the lane maps,
# and the same probabilities are returned to a BCEWithLogitsLoss, which applies the sigmoid again,
# so the existence scores can never go below 0.5. The sigmoid layer is needed (it gates the maps):
# the line to look at is its call, whose output is returned as if it were logits.
# Fixed twin: forward returns the existence logits; the gate keeps the probabilities.
import torch
from torch import nn


class LaneNet(nn.Module):
    def __init__(self, lanes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.seg = nn.Conv2d(8, lanes, 1)
        self.exist_fc = nn.Linear(8, lanes)
        self.act = nn.Sigmoid()

    def forward(self, x):
        feats = self.backbone(x)
        exist_logits = self.exist_fc(feats.mean(dim=(2, 3)))
        exist = self.act(exist_logits)
        maps = self.seg(feats) * exist[:, :, None, None]
        return maps, exist_logits


torch.manual_seed(3)
model = LaneNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
seg_loss, exist_loss = nn.MSELoss(), nn.BCEWithLogitsLoss()
images = torch.randn(8, 3, 12, 12)
lane_maps, present = torch.rand(8, 4, 12, 12), (torch.rand(8, 4) > 0.5).float()
for step in range(6):
    optimizer.zero_grad()
    maps, scores = model(images)
    loss = seg_loss(maps, lane_maps) + exist_loss(scores, present)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
