# Modelled on facebookresearch/active-mri-acquisition#17
# (https://github.com/facebookresearch/active-mri-acquisition/issues/17): "In the current version
# of the code we always work in .train() mode". The evaluation function opens with the same
# model.train() as the training function it was copied from, so the reconstruction error is
# measured with Dropout dropping and BatchNorm on batch statistics; the line to change is that
# train() call, not the forward. Fixed: evaluate() calls model.eval().
import torch
from torch import nn


def make_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Dropout2d(0.2), nn.Conv2d(8, 1, 3, padding=1))


def train_one_epoch(model, opt, scans):
    model.train()
    for kspace, target in scans:
        loss = nn.functional.l1_loss(model(kspace), target)
        opt.zero_grad()
        loss.backward()
        opt.step()


def evaluate(model, scans):
    model.eval()
    errors = []
    with torch.no_grad():
        for kspace, target in scans:
            errors.append(nn.functional.l1_loss(model(kspace), target).item())
    return sum(errors) / len(errors)


torch.manual_seed(0)
train_scans = [(torch.randn(4, 1, 16, 16), torch.randn(4, 1, 16, 16)) for _ in range(4)]
val_scans = [(torch.randn(4, 1, 16, 16), torch.randn(4, 1, 16, 16)) for _ in range(2)]
model = make_model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    train_one_epoch(model, opt, train_scans)
    print(epoch, evaluate(model, val_scans))
