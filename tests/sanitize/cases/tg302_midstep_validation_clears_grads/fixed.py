# Report: https://github.com/Lightning-AI/pytorch-lightning/issues/272
# Modelled on Lightning-AI/pytorch-lightning#272 (an evaluation run reached between the backward
# and the optimizer step calls model.zero_grad()): a trainer for a sentiment bag-of-embeddings
# classifier; the fixed twin runs its periodic validation after the optimizer step, where the
# validation's own zero_grad discards nothing.
import torch
import torch.nn.functional as F
from torch import nn


class BagClassifier(nn.Module):
    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.out = nn.Linear(dim, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(tokens))


class Trainer:
    def __init__(self, model: nn.Module, held_out: tuple) -> None:
        self.model = model
        self.held_out = held_out
        self.optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        self.scores: list[float] = []

    def validate(self) -> None:
        self.model.zero_grad(set_to_none=True)  # gradients are not needed to evaluate
        tokens, labels = self.held_out
        self.model.eval()
        with torch.no_grad():
            hits = (self.model(tokens).argmax(1) == labels).float().mean()
        self.model.train()
        self.scores.append(hits.item())

    def fit(self, batches: list, every: int) -> None:
        for i, (tokens, labels) in enumerate(batches):
            loss = F.cross_entropy(self.model(tokens), labels)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            if i % every == 0:
                self.validate()  # after the step: nothing left to discard


torch.manual_seed(3)
data = [(torch.randint(0, 50, (16, 6)), torch.randint(0, 2, (16,))) for _ in range(4)]
trainer = Trainer(BagClassifier(50, 8), (torch.randint(0, 50, (8, 6)), torch.randint(0, 2, (8,))))
trainer.fit(data, every=1)
print(f"held-out accuracy {trainer.scores[-1]:.2f}")
