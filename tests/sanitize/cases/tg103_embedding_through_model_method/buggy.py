# Modelled on GitHub amyxlu/CPCProt#4 (https://github.com/amyxlu/CPCProt/issues/4): embeddings
# are taken through a method of the model (`get_context()`, not `model(x)`), after training and
# `eval()`, but with grad enabled, so every batch keeps a graph nobody backpropagates (CUDA out
# of memory there); the fix wraps the call in `torch.no_grad()`. embed_all() calls eval() and
# trains nothing, so it is reported at its def, where `@torch.no_grad()` goes.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(3)
VOCAB, LENGTH = 21, 24


class ContextEncoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.conv = nn.Sequential(nn.Conv1d(dim, dim, 3, padding=1), nn.BatchNorm1d(dim), nn.ReLU())
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def get_context(self, tokens):
        z = self.conv(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        c, _ = self.gru(z)
        return c[:, -1]

    def forward(self, tokens):
        return self.head(self.get_context(tokens[:, :-1]))


def train(model, sequences, epochs=2):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(epochs):
        for i in range(0, len(sequences), 8):
            batch = sequences[i:i + 8]
            loss = F.cross_entropy(model(batch), batch[:, -1])
            opt.zero_grad()
            loss.backward()
            opt.step()


def embed_all(model, sequences):  # expect: TG103
    model.eval()
    out = []
    for i in range(0, len(sequences), 8):
        c = model.get_context(sequences[i:i + 8])
        out.append(c.detach())
    return torch.cat(out)


sequences = torch.randint(0, VOCAB, (32, LENGTH))
model = ContextEncoder()
train(model, sequences)
print(embed_all(model, sequences).shape)
