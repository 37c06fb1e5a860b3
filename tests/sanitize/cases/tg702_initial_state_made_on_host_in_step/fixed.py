# Fixed twin of buggy.py (https://github.com/Lightning-AI/pytorch-lightning/issues/3738): the
# initial LSTM state is made on the device of the letters it goes with.
import torch
from torch import nn

DEVICE = torch.device("meta")


class NameGenerator(nn.Module):
    def __init__(self, letters=28, width=24):
        super().__init__()
        self.embed = nn.Embedding(letters, width)
        self.lstm = nn.LSTM(width, width, batch_first=True)
        self.head = nn.Linear(width, letters)

    def forward(self, letters, hidden, cell):
        out, (hidden, cell) = self.lstm(self.embed(letters), (hidden, cell))
        return self.head(out), hidden, cell


def train_step(model, optimizer, names):
    names = names.to(DEVICE)
    hidden = torch.zeros(1, names.shape[0], 24, device=names.device)
    cell = torch.zeros_like(hidden)
    logits, hidden, cell = model(names[:, :-1], hidden, cell)
    loss = nn.functional.cross_entropy(logits.transpose(1, 2), names[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


torch.manual_seed(7)
generator = NameGenerator().to(DEVICE)
opt = torch.optim.Adam(generator.parameters(), lr=1e-3)
for _ in range(2):
    train_step(generator, opt, torch.randint(0, 28, (6, 9)))
