# Modelled on GitHub shubhamagarwal92/mmd#14 (https://github.com/shubhamagarwal92/mmd/issues/14):
# the trainer's evaluate() calls model.eval() to switch Dropout off and nothing switches it back,
# while model.train() runs once before the epoch loop, so every epoch after the first evaluation
# trains with Dropout off.
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 16, tags: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.drop = nn.Dropout(0.4)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(tokens))
        return self.out(self.drop(hidden))


class Trainer:
    def __init__(self, model: nn.Module, data, val_data) -> None:
        self.model = model
        self.data, self.val_data = data, val_data
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.criterion = nn.CrossEntropyLoss()

    def evaluate(self) -> float:
        self.model.eval()
        tokens, tags = self.val_data
        with torch.no_grad():
            pred = self.model(tokens).argmax(-1)
        return (pred == tags).float().mean().item()

    def fit(self, epochs: int) -> None:
        self.model.train()
        for epoch in range(epochs):  # expect: TG102
            for tokens, tags in self.data:
                self.optimizer.zero_grad()
                scores = self.model(tokens)
                loss = self.criterion(scores.reshape(-1, scores.shape[-1]), tags.reshape(-1))
                loss.backward()
                self.optimizer.step()
            print(epoch, self.evaluate())


torch.manual_seed(0)
batches = [(torch.randint(0, 50, (4, 7)), torch.randint(0, 5, (4, 7))) for _ in range(3)]
Trainer(Tagger(), batches, (torch.randint(0, 50, (4, 7)), torch.randint(0, 5, (4, 7)))).fit(3)
