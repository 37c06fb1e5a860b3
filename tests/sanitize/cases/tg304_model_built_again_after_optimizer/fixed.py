# Fixed twin of buggy.py (https://github.com/spro/practical-pytorch/issues/21): the RNN is built
# once, before its optimizer.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class RNN(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.i2h = nn.Linear(n_in + n_hidden, n_hidden)
        self.i2o = nn.Linear(n_in + n_hidden, n_out)

    def forward(self, x, h):
        combined = torch.cat([x, h], 1)
        return F.log_softmax(self.i2o(combined), dim=1), torch.tanh(self.i2h(combined))


# %% model and optimizer
rnn = RNN(8, 16, 3)
optimizer = torch.optim.SGD(rnn.parameters(), lr=0.05, momentum=0.9)

# %% training
for it in range(60):
    seq, label = torch.randn(5, 1, 8), torch.randint(0, 3, (1,))
    h = torch.zeros(1, 16)
    for t in range(seq.size(0)):
        out, h = rnn(seq[t], h)
    loss = F.nll_loss(out, label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
