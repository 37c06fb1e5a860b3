# Modelled on the forum thread "RuntimeError: Trying to backward through the graph a second time"
# (https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795):
# truncated backpropagation through time where the RNN's hidden state is carried to the next chunk
# without detach, so the second chunk's backward reaches into the first chunk's freed graph.
import torch
from torch import nn

torch.manual_seed(5)
sequence = torch.randn(2, 12, 3)  # (batch, time, features)
rnn = nn.GRU(3, 8, batch_first=True)
head = nn.Linear(8, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
hidden = torch.zeros(1, 2, 8)

for start in range(0, 12, 4):
    chunk = sequence[:, start:start + 4]
    output, hidden = rnn(chunk, hidden)  # expect: TG202
    loss = head(output).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
