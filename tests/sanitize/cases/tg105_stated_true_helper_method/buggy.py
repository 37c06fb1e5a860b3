# Modelled on pytorch/pytorch#26338 "Behavior of F.dropout in eval mode"
# (https://github.com/pytorch/pytorch/issues/26338) and Coderx7/SimpleNet#2
# (https://github.com/Coderx7/SimpleNet/issues/2): functional dropout written with a literal
# `training=True`, here in a helper method of an LSTM sentiment model that forward calls. After
# model.eval() the validation loss still sees dropped activations, so it is noisy and higher than
# it should be.
# Fixed twin: the helper passes training=self.training.
import torch
import torch.nn.functional as F
from torch import nn


class SentimentLSTM(nn.Module):
    def __init__(self, vocab=50, dim=16, p=0.3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, 2)
        self.p = p

    def _pool(self, states):
        pooled = states.mean(1)
        return F.dropout(pooled, p=self.p, training=True)  # expect: TG105

    def forward(self, tokens):
        states, _ = self.lstm(self.embed(tokens))
        return self.out(self._pool(states))


def run_epoch(model, batches, optimizer=None):
    model.train(optimizer is not None)
    total = 0.0
    with torch.set_grad_enabled(optimizer is not None):
        for tokens, labels in batches:
            loss = F.cross_entropy(model(tokens), labels)
            if optimizer is not None:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            total += loss.item()
    return total / len(batches)


def make_batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 50, (8, 12), generator=g), torch.randint(0, 2, (8,), generator=g))
            for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SentimentLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train, valid = make_batches(4, 0), make_batches(2, 1)
    for epoch in range(2):
        print(epoch, run_epoch(model, train, optimizer), run_epoch(model, valid))
