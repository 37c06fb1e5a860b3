# Report: https://github.com/wolny/pytorch-3dunet/issues/53
# A volumetric segmentation trainer validates with its model still in training mode: validate()
# first builds its score meter and unpacks the held-out volumes, then runs the forwards under
# no_grad, and never calls self.model.eval() (Dropout3d stays on, so the validation Dice changes
# from call to call). The call belongs at the top of validate(), before that set-up.
import torch
from torch import nn

torch.manual_seed(0)


class DiceMeter:
    def __init__(self):
        self.inter, self.union = 0.0, 0.0

    def update(self, logits, masks):
        pred = (logits.sigmoid() > 0.5).float()
        self.inter += float((pred * masks).sum())
        self.union += float(pred.sum() + masks.sum())

    def value(self):
        return 2 * self.inter / max(self.union, 1.0)


class Trainer:
    def __init__(self, model, train_data, val_data):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        self.train_data, self.val_data = train_data, val_data

    def train_epoch(self):
        self.model.train()
        for volume, mask in self.train_data:
            loss = nn.functional.binary_cross_entropy_with_logits(self.model(volume), mask)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self):
        self.model.eval()
        meter = DiceMeter()
        volumes, masks = self.val_data
        with torch.no_grad():
            for volume, mask in zip(volumes.split(2), masks.split(2)):
                meter.update(self.model(volume), mask)
        return meter.value()


net = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.ReLU(), nn.Dropout3d(0.3),
                    nn.Conv3d(4, 1, 1))
train = [(torch.randn(2, 1, 6, 6, 6), (torch.rand(2, 1, 6, 6, 6) > 0.5).float())
         for _ in range(3)]
val = (torch.randn(4, 1, 6, 6, 6), (torch.rand(4, 1, 6, 6, 6) > 0.5).float())
trainer = Trainer(net, train, val)
for epoch in range(2):
    trainer.train_epoch()
    print(f"epoch {epoch}: validation dice {trainer.validate():.3f}")
