# Modelled on the forum thread "RuntimeError: one of the variables needed for gradient computation
# has been modified by an inplace operation"
# (https://discuss.pytorch.org/t/runtimeerror-one-of-the-variables-needed-for-gradient-computation-has-been-modified-by-an-inplace-operation/836):
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
