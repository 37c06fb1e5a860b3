# Modelled on GitHub JDAI-CV/LIO#9 ("... which is output 0 of SubBackward0, is at version 1;
# expected version 0") and Seanny123/da-rnn#14 (https://github.com/Seanny123/da-rnn/issues/14):
# a gate's sigmoid output is shifted in place, but sigmoid's backward needs its original output.
import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.value = nn.Linear(4, 4)
        self.gate = nn.Linear(4, 4)

    def forward(self, x):
        gate = torch.sigmoid(self.gate(x))
        out = self.value(x) * gate
        gate -= 0.5  # expect: TG207
        return out + gate


torch.manual_seed(9)
model = Gated()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
optimizer.zero_grad()
loss = model(torch.randn(3, 4)).pow(2).mean()
loss.backward()
optimizer.step()
