# Modelled on the question "Cross-entropy loss is 0.74 although the prediction is [0, 0, 0, 1]"
# (https://openillumi.com/?p=73112, the Cross Validated thread "Pytorch Cross Entropy Loss
# Implementation Counterintuitive"): the validation pass turns the logits into probabilities and
# gives them to CrossEntropyLoss under torch.no_grad(), so the reported validation loss never
# approaches zero and is not comparable to the training loss.
import torch
from torch import nn


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def validate(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.model.eval()
        probs = self.model(x).softmax(dim=1)  # expect: TG401
        return self.criterion(probs, y).item()


torch.manual_seed(4)
x, y = torch.randn(80, 12), torch.randint(0, 5, (80,))
trainer = Trainer()
for epoch in range(3):
    train_loss = trainer.train_epoch(x[:60], y[:60])
    val_loss = trainer.validate(x[60:], y[60:])
print(f"train {train_loss:.3f} val {val_loss:.3f}")
