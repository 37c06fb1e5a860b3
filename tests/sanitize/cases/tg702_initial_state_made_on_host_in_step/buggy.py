# Modelled on Lightning-AI/pytorch-lightning#3738
# (https://github.com/Lightning-AI/pytorch-lightning/issues/3738): "At first I initialize hidden
# and cell with zeros using torch.zeros. Unfortunately these tensors are by default on the cpu",
# so the LSTM fails with "Input and hidden tensors are not at the same device". A name generator's
# step function moves the letters to the accelerator ("meta" stands in for "cuda") but makes the
# initial state without a device; the line to change is that torch.zeros, not the model call.
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
    hidden = torch.zeros(1, names.shape[0], 24)  # expect: TG702
    cell = torch.zeros(1, names.shape[0], 24)
    names = names.to(DEVICE)
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
