# Fixed twin of buggy.py
# (https://github.com/JDAI-CV/LIO/issues/9):
# the shift is out of place, so the saved sigmoid output is left as it was. Near-miss that must
# stay silent: an in-place ReLU on a tensor no backward formula saved.
import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.value = nn.Linear(4, 4)
        self.gate = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        gate = torch.sigmoid(self.gate(x))
        out = self.value(x) * gate
        centred = gate - 0.5
        return self.act(out + centred)


torch.manual_seed(9)
model = Gated()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
optimizer.zero_grad()
loss = model(torch.randn(3, 4)).pow(2).mean()
loss.backward()
optimizer.step()
