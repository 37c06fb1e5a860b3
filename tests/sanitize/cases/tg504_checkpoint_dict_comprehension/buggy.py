# A speech trainer whose checkpoint is built by a dict comprehension over the keys its class names
# (`ckpt_keys`): the keys hold the model and the epoch, not the optimizer, so Adam's moments
# restart on resume. Modelled on alibaba/TorchEasyRec#664
# (https://github.com/alibaba/TorchEasyRec/issues/664: state left out of the checkpoint).
import os
import tempfile

import torch
import torch.nn as nn


class Trainer:
    ckpt_keys = ("model", "epoch")

    def __init__(self):
        self.model = nn.Sequential(nn.Linear(40, 64), nn.ReLU(), nn.Linear(64, 10))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.epoch = 0

    def state(self, key):
        value = getattr(self, key)
        return value.state_dict() if hasattr(value, "state_dict") else value

    def save(self, path):
        ckpt = {k: self.state(k) for k in self.ckpt_keys}  # expect: TG504
        ckpt["saved_by"] = "trainer"
        torch.save(ckpt, path)

    def resume(self, path):
        ckpt = torch.load(path)
        self.model.load_state_dict(ckpt["model"])
        self.epoch = ckpt["epoch"]

    def train_epoch(self, feats, labels):
        loss = nn.functional.cross_entropy(self.model(feats), labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.epoch += 1


path = os.path.join(tempfile.mkdtemp(), "last.pt")
trainer = Trainer()
for epoch in range(3):
    trainer.train_epoch(torch.randn(8, 40), torch.randint(0, 10, (8,)))
    trainer.save(path)
trainer.resume(path)
