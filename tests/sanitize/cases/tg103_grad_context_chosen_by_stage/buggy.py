# Report: https://github.com/facebookresearch/fairchem/pull/199
# Modelled on facebookresearch/fairchem#199 ("Validation memory usage is higher than that of
# training"): the validation forwards recorded autograd graphs. Here one stage function serves
# training and validation and picks its grad context from the stage's name; the trainer calls
# it with "val" while the test compares with "validation", so validation runs with grad on and
# keeps every batch's graph in the returned energies.
import contextlib

import torch
from torch import nn


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def run_stage(self, stage, data):
        self.model.train(stage == "train")
        context = (torch.no_grad() if stage == "validation"  # expect: TG103
                   else contextlib.nullcontext())
        energies = []
        with context:
            for x, y in data:
                pred = self.model(x).squeeze(-1)
                loss = nn.functional.mse_loss(pred, y)
                if stage == "train":
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                    pred = pred.detach()
                energies.append(pred)
        return torch.cat(energies)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 32), nn.SiLU(), nn.Dropout(0.1), nn.Linear(32, 1))
trainer = Trainer(model)
train = [(torch.randn(16, 6), torch.randn(16)) for _ in range(4)]
val = [(torch.randn(16, 6), torch.randn(16)) for _ in range(2)]
for epoch in range(2):
    trainer.run_stage("train", train)
    energies = trainer.run_stage("val", val)
    print(epoch, float(energies.mean()))
