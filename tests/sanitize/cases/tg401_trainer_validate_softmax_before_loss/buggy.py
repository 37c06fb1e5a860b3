# Modelled on GitHub leeyegy/SimCC#13 (https://github.com/leeyegy/SimCC/issues/13): the validation
# applies softmax to the predicted coordinate distributions before the loss, which already applies
# its own (log-)softmax, while training gives it the raw scores, so the two losses are not
# comparable. Here, a class-based trainer of a tiny 1-D coordinate classifier.
import torch
from torch import nn

torch.manual_seed(4)
BINS = 12


class CoordHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, BINS))

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self) -> None:
        self.model = CoordHead()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def batch(self):
        x = torch.randn(10, 8)
        return x, (x[:, 0].abs() * 4).long().clamp(max=BINS - 1)

    def train_step(self):
        self.model.train()
        x, y = self.batch()
        loss = self.criterion(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            x, y = self.batch()
            output = self.model(x)
            output = torch.softmax(output, dim=1)  # expect: TG401
            return self.criterion(output, y).item()

    def fit(self, epochs=3):
        for epoch in range(epochs):
            for _ in range(3):
                self.train_step()
            print(f"epoch {epoch}: val loss {self.validate():.3f}")


Trainer().fit()
