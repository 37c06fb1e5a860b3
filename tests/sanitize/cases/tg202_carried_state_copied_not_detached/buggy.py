# Modelled on GitHub yunjey/pytorch-tutorial#90
# (https://github.com/yunjey/pytorch-tutorial/issues/90, "states = detach(states)"): a character
# language model carries its LSTM states from one chunk to the next through a helper meant to
# cut them from the previous chunk's graph; the helper copies them with clone(), which keeps the
# history, so the second chunk's backward runs into the first chunk's freed graph. Here, random
# token streams.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(8)


class CharLM(nn.Module):
    def __init__(self, vocab: int = 20, hidden: int = 24) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 12)
        self.lstm = nn.LSTM(12, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids, states):
        out, states = self.lstm(self.embed(ids), states)
        return self.head(out), states


def carry(states):
    return tuple(s.clone() for s in states)  # expect: TG202


model = CharLM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
stream = torch.randint(0, 20, (4, 61))
states = (torch.zeros(1, 4, 24), torch.zeros(1, 4, 24))
for start in range(0, 60, 15):
    ids, targets = stream[:, start:start + 15], stream[:, start + 1:start + 16]
    states = carry(states)
    logits, states = model(ids, states)
    loss = F.cross_entropy(logits.reshape(-1, 20), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
