# Modelled on alexrich021/3dvnet#11 (https://github.com/alexrich021/3dvnet/issues/11): a
# pretrained feature extractor is put in eval mode at every training step, on purpose, so that its
# BatchNorm statistics stay fixed with small batches, while its weights and a depth head with
# Dropout, put in training mode beside it, keep learning under one optimizer. Here the step sets the
# head's mode only: the extractor trains its BatchNorm in the first epoch, and from the second on
# stays in the eval mode that validation left it in, which nothing meant.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
depth_head = nn.Sequential(nn.Dropout2d(0.2), nn.Conv2d(8, 1, 1))
optimizer = torch.optim.Adam([*features.parameters(), *depth_head.parameters()], lr=1e-3)
with torch.no_grad():  # stand-in for pretrained statistics
    for _ in range(4):
        features(torch.randn(8, 3, 12, 12))

for epoch in range(3):
    for step in range(6):
        images, depth = torch.randn(2, 3, 12, 12), torch.rand(2, 1, 12, 12)
        depth_head.train()
        loss = F.l1_loss(depth_head(features(images)), depth)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    features.eval()  # expect: TG102
    depth_head.eval()
    with torch.no_grad():
        val = F.l1_loss(depth_head(features(torch.randn(4, 3, 12, 12))), torch.rand(4, 1, 12, 12))
    print(f"epoch {epoch} train {loss.item():.4f} val {val.item():.4f}")
