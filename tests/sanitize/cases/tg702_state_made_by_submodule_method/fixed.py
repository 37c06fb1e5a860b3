# Modelled on Lightning-AI/pytorch-lightning#3738
# (https://github.com/Lightning-AI/pytorch-lightning/issues/3738): "At first I initialize hidden
# and cell with zeros using torch.zeros. Unfortunately this tensors are defaultly assigned to the
# cpu". Here a character model stacks its own recurrent cells, and the outer model asks each cell
# for its initial state (`cell.init_state(batch)`): the factory without a device sits in the
# cell's class, not in the model that holds the state. "meta" stands in for "cuda".
import torch
from torch import nn


class CharCell(nn.Module):
    def __init__(self, size: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell = nn.LSTMCell(size, hidden)

    def init_state(self, batch: int):
        weight = self.cell.weight_hh
        return (torch.zeros(batch, self.hidden, device=weight.device),
                torch.zeros(batch, self.hidden, device=weight.device))

    def forward(self, x, state):
        return self.cell(x, state)


class CharModel(nn.Module):
    def __init__(self, vocab: int = 20, hidden: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cells = nn.ModuleList([CharCell(hidden, hidden), CharCell(hidden, hidden)])
        self.out = nn.Linear(hidden, vocab)

    def forward(self, letters):
        x = self.embed(letters)
        for cell in self.cells:
            state = cell.init_state(letters.shape[0])
            steps = []
            for t in range(letters.shape[1]):
                state = cell(x[:, t], state)
                steps.append(state[0])
            x = torch.stack(steps, dim=1)
        return self.out(x)


device = torch.device("meta")
torch.manual_seed(0)
model = CharModel().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
letters = torch.randint(0, 20, (4, 7)).to(device)
optimizer.zero_grad()
loss = model(letters).logsumexp(-1).mean()
loss.backward()
optimizer.step()
