# Modelled on udacity/deep-learning-v2-pytorch#397
# (https://github.com/udacity/deep-learning-v2-pytorch/pull/397), whose review asks that
# model.train() be added back once model.eval() is used: here the script is split into functions,
# main() calls model.train() once, before the epoch loop, and the per-epoch check_accuracy()
# calls model.eval(), so every epoch after the first runs run_epoch() in eval mode (an LSTM tagger
# whose Dropout stops working). run_epoch() starts in whatever mode the evaluation left: as in
# PyTorch's quickstart, model.train() belongs at its start (or the one train() moved into the loop).
import torch
from torch import nn
import torch.nn.functional as F


class Tagger(nn.Module):
    def __init__(self, vocab: int = 40, dim: int = 12, tags: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(tokens))
        return self.out(self.drop(hidden))


def run_epoch(model: nn.Module, batches: list, optimizer: torch.optim.Optimizer) -> float:
    total = 0.0  # expect: TG102
    for tokens, tags in batches:
        scores = model(tokens)
        loss = F.cross_entropy(scores.flatten(0, 1), tags.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


def check_accuracy(model: nn.Module, tokens: torch.Tensor, tags: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return (model(tokens).argmax(-1) == tags).float().mean().item()


def main(epochs: int = 3) -> None:
    torch.manual_seed(0)
    batches = [(torch.randint(0, 40, (4, 6)), torch.randint(0, 4, (4, 6))) for _ in range(3)]
    dev = (torch.randint(0, 40, (8, 6)), torch.randint(0, 4, (8, 6)))
    model = Tagger()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for epoch in range(epochs):
        loss = run_epoch(model, batches, optimizer)
        print(epoch, loss, check_accuracy(model, *dev))


if __name__ == "__main__":
    main()
