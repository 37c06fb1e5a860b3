# Fixed twin of buggy.py (eecn/Hyperspectral-Classification#21,
# https://github.com/eecn/Hyperspectral-Classification/issues/21): the held-out pixels are
# scored after self.net.eval(); the next epoch's self.net.train() restores training mode.
import torch
from torch import nn

torch.manual_seed(0)


class SpectralTrainer:
    def __init__(self, bands, classes):
        self.net = nn.Sequential(nn.Linear(bands, 48), nn.BatchNorm1d(48), nn.ReLU(),
                                 nn.Dropout(0.4), nn.Linear(48, classes))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05, momentum=0.9)
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, patience=2)
        self.criterion = nn.CrossEntropyLoss()
        self.history = {"held_out": []}

    def fit(self, pixels, labels, held_pixels, held_labels, epochs=3):
        for epoch in range(epochs):
            self.net.train()
            order = torch.randperm(len(pixels))
            for start in range(0, len(pixels), 32):
                pick = order[start:start + 32]
                self.opt.zero_grad()
                loss = self.criterion(self.net(pixels[pick]), labels[pick])
                loss.backward()
                self.opt.step()
            self.net.eval()
            with torch.no_grad():
                held = self.criterion(self.net(held_pixels), held_labels).item()
            self.history["held_out"].append(held)
            self.plateau.step(held)


cube = torch.randn(256, 20)
truth = (cube[:, :4].sum(1) > 0).long() + (cube[:, 4] > 1).long()
trainer = SpectralTrainer(20, 3)
trainer.fit(cube[:192], truth[:192], cube[192:], truth[192:])
print("held-out loss per epoch:", [round(v, 3) for v in trainer.history["held_out"]])
