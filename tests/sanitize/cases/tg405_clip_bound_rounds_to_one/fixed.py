# Report: https://github.com/snipsco/ntm-lasagne/issues/20
# Modelled on snipsco/ntm-lasagne#20 ("1. - 1e-10 == 1."): the outputs of a recurrent model are
# clipped to [1e-10, 1 - 1e-10] before a hand-written binary cross-entropy, but 1 - 1e-10 cannot
# be represented in float32 and rounds to 1.0, so a saturated output stays at 1 and log(1 - p)
# is log(0) = -inf; (1 - y) * -inf is NaN for the bits that are 1. Fixed: an epsilon of 1e-6.
import torch
from torch import nn

EPS = 1e-6  # representable next to 1.0 in float32


class CopyHead(nn.Module):
    def __init__(self, bits: int = 8) -> None:
        super().__init__()
        self.rnn = nn.GRU(bits, 32, batch_first=True)
        self.out = nn.Linear(32, bits)
        nn.init.constant_(self.out.bias, 40.0)  # saturated from the start

    def forward(self, x):
        h, _ = self.rnn(x)
        return torch.sigmoid(self.out(h))


def binary_crossentropy(p, y):
    p = p.clamp(EPS, 1.0 - EPS)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()


torch.manual_seed(0)
model = CopyHead()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for step in range(4):
    seq = torch.randint(0, 2, (4, 6, 8)).float()
    loss = binary_crossentropy(model(seq), seq)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
