# Fixed twin of buggy.py
# (https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795):
# the carried state is detached and retain_graph is dropped. Near-miss that must stay silent: two
# losses through one graph with retain_graph=True on the first backward.
import torch
from torch import nn

torch.manual_seed(15)
sequence = torch.randn(2, 16, 3)
rnn = nn.RNN(3, 6, batch_first=True)
head = nn.Linear(6, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)
state = torch.zeros(1, 2, 6)

for start in range(0, 16, 4):
    output, state = rnn(sequence[:, start:start + 4], state.detach())
    prediction = head(output)
    optimizer.zero_grad()
    prediction.pow(2).mean().backward(retain_graph=True)
    prediction.abs().mean().backward()
    optimizer.step()
