# Modelled on jpata/particleflow#290 (https://github.com/jpata/particleflow/pull/290): a trainer's
# compute_loss(batch) runs the model for both training and validation; validate() puts the model
# in eval mode but calls it without torch.no_grad(), so every validation batch records a graph.
# The model call is shared with training: validate()'s call into compute_loss is the line to wrap.
import torch
from torch import nn
import torch.nn.functional as F


class Trainer:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.1), nn.ReLU(), nn.Linear(16, 3))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.train_batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(4)]
        self.val_batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(2)]

    def compute_loss(self, batch: tuple) -> tuple:
        x, y = batch
        logits = self.model(x)
        return F.cross_entropy(logits, y), logits

    def train_epoch(self) -> None:
        self.model.train()
        for batch in self.train_batches:
            loss, _ = self.compute_loss(batch)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

    def validate(self) -> float:
        self.model.eval()
        total = 0.0
        for batch in self.val_batches:
            loss, logits = self.compute_loss(batch)  # expect: TG103
            total += loss.item()
        return total / len(self.val_batches)


trainer = Trainer()
for epoch in range(2):
    trainer.train_epoch()
    print(trainer.validate())
