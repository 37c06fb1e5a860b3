# Modelled on the forum thread behind PyTorch's "Trying to backward through the graph a second
# time" error, where retain_graph=True is offered as the fix for a carried RNN state
# (https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795):
# the first error goes away, the graphs of all earlier chunks stay alive, and the next backward
# dies because optimizer.step() changed the weights those old graphs saved.
import torch
from torch import nn

torch.manual_seed(15)
sequence = torch.randn(2, 16, 3)
rnn = nn.RNN(3, 6, batch_first=True)
head = nn.Linear(6, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)
state = torch.zeros(1, 2, 6)

for start in range(0, 16, 4):
    output, state = rnn(sequence[:, start:start + 4], state)
    loss = head(output).pow(2).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)  # expect: TG203, TG207
    optimizer.step()
