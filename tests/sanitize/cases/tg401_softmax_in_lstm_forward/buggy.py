# Modelled on "Understanding PyTorch's torch.nn.Softmax and CrossEntropyLoss"
# (https://runebook.dev/en/docs/pytorch/generated/torch.nn.softmax): an LSTM text classifier
# returns class probabilities from forward, and the training loop gives them to
# F.cross_entropy, which applies log_softmax again; the loss floors above zero.
import torch
import torch.nn.functional as F
from torch import nn


class SentimentLSTM(nn.Module):
    def __init__(self, vocab: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.head = nn.Linear(32, classes)

    def classify(self, last: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.head(last), dim=-1)  # expect: TG401

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq, _ = self.lstm(self.embed(tokens))
        return self.classify(seq[:, -1])


def train(model: nn.Module, batches, epochs: int) -> float:
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(epochs):
        for tokens, labels in batches:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(tokens), labels)
            loss.backward()
            optimizer.step()
    return loss.item()


torch.manual_seed(6)
batches = [(torch.randint(0, 50, (8, 10)), torch.randint(0, 3, (8,))) for _ in range(4)]
print(f"loss {train(SentimentLSTM(50, 3), batches, 2):.3f}")
