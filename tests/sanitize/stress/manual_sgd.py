"""pytorch/examples' word_language_model loop on generated tokens: an LSTM language model trained
without an optimizer, by ``p.data.add_(p.grad, alpha=-lr)`` after ``clip_grad_norm_``, the hidden
state detached between batches (truncated backpropagation through time), 300 batches
(https://github.com/pytorch/examples/blob/main/word_language_model/main.py)."""

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)
ntokens, emsize, nhid, nlayers, bptt, batch_size = 500, 32, 32, 2, 20, 10


class RNNModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntokens, emsize)
        self.rnn = nn.LSTM(emsize, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntokens)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        decoded = self.decoder(self.drop(output)).view(-1, ntokens)
        return nn.functional.log_softmax(decoded, dim=1), hidden


def repackage_hidden(h):
    return h.detach() if isinstance(h, torch.Tensor) else tuple(repackage_hidden(v) for v in h)


data = torch.randint(0, ntokens, (300 * bptt + 1, batch_size))
model = RNNModel()
criterion = nn.NLLLoss()
lr = 20.0
model.train()
hidden = (torch.zeros(nlayers, batch_size, nhid), torch.zeros(nlayers, batch_size, nhid))
total = 0.0
for i in range(0, data.size(0) - 1, bptt):
    tokens, targets = data[i:i + bptt], data[i + 1:i + 1 + bptt].reshape(-1)
    model.zero_grad()
    hidden = repackage_hidden(hidden)
    output, hidden = model(tokens, hidden)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    total += loss.item()
print(f"mean loss {total / 300:.4f}")
save(model)
