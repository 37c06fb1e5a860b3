# Modelled on joeynmt/joeynmt#184 (https://github.com/joeynmt/joeynmt/issues/184): the training
# loop validates every few steps; validation calls a prediction helper that puts the model in eval
# mode, and training mode only comes back at the next epoch's model.train(), so the rest of each
# epoch trains with Dropout off. Reported where the helper returns with the model still in eval
# mode (the mode is restored there, or after the call into it, as the fixed twin does).
import torch
from torch import nn
import torch.nn.functional as F


class Seq2Label(nn.Module):
    def __init__(self, vocab: int = 30, dim: int = 16, labels: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(dim, labels)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.embed(tokens).mean(1)))


def predict(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(tokens).argmax(-1)  # expect: TG102


class TrainManager:
    def __init__(self, model: nn.Module, batches: list, dev: tuple, every: int = 2) -> None:
        self.model, self.batches, self.dev, self.every = model, batches, dev, every
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        self.steps = 0

    def _validate(self) -> float:
        tokens, labels = self.dev
        return (predict(self.model, tokens) == labels).float().mean().item()

    def train_and_validate(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.model.train()
            for tokens, labels in self.batches:
                loss = F.cross_entropy(self.model(tokens), labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.steps += 1
                if self.steps % self.every == 0:
                    print(epoch, self.steps, self._validate())


torch.manual_seed(0)
batches = [(torch.randint(0, 30, (8, 5)), torch.randint(0, 4, (8,))) for _ in range(4)]
TrainManager(Seq2Label(), batches, (torch.randint(0, 30, (8, 5)), torch.randint(0, 4, (8,)))
             ).train_and_validate(2)
