# Report: https://github.com/spro/practical-pytorch/issues/21
# The char-RNN name classifier of the PyTorch tutorials: no optimizer; each name is unrolled one
# character per forward, backpropagated once, and the parameters updated by hand under no_grad.
# train() returns the last output, which the loop keeps until the next name replaces it: the
# forwards of one name are one update, and one kept output is no growing leak.
import torch
from torch import nn

torch.manual_seed(0)
letters, categories = 8, 3


class RNN(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.hidden = hidden
        self.i2h = nn.Linear(letters + hidden, hidden)
        self.i2o = nn.Linear(letters + hidden, categories)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple:
        both = torch.cat((x, h), 1)
        return torch.log_softmax(self.i2o(both), dim=1), torch.tanh(self.i2h(both))


rnn = RNN()
criterion = nn.NLLLoss()


def train(category: torch.Tensor, line: torch.Tensor) -> tuple:
    hidden = torch.zeros(1, rnn.hidden)
    for i in range(line.size(0)):
        output, hidden = rnn(line[i], hidden)
    loss = criterion(output, category)
    loss.backward()
    with torch.no_grad():
        for p in rnn.parameters():
            p.add_(p.grad, alpha=-0.005)
            p.grad = None
    return output, loss.item()


current = 0.0
for it in range(40):
    length = 3 + it % 5
    line = torch.eye(letters)[torch.randint(0, letters, (length,))].unsqueeze(1)
    output, loss = train(torch.tensor([it % categories]), line)
    current += loss
print(current / 40, output.argmax().item())
