# Modelled on ServiceNow/LCFCN#20 (https://github.com/ServiceNow/LCFCN/issues/20): the training
# loop calls a helper module's get_blob_dict(model, images), which puts the model in eval mode to
# predict blobs; model.train() runs only once per epoch, so every step trains with Dropout off.
# The helper serves every caller: the call in the training loop is where train() belongs.
import torch
from torch import nn
import torch.nn.functional as F

import blobs

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Dropout2d(0.3),
                      nn.Conv2d(8, 1, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    model.train()
    for step in range(4):
        images = torch.rand(4, 1, 8, 8)
        blob_dict = blobs.get_blob_dict(model, images)
        model.train()
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(images), blob_dict["blobs"].float())
        loss.backward()
        opt.step()
