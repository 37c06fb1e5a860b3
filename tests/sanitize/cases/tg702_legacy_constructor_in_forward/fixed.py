# Modelled on pytorch/pytorch#20122 (https://github.com/pytorch/pytorch/issues/20122, "Is the
# `device=` parameter required in torch.FloatTensor"): the decoder's start column is made with
# logits.new_zeros(...), on the device (and dtype) of the outputs it is concatenated with, instead
# of the CPU-only legacy torch.FloatTensor constructor. The "meta" device stands in for "cuda".
# Must stay silent.
import torch
from torch import nn

device = torch.device("meta")
torch.manual_seed(2)


class ShiftedDecoder(nn.Module):
    def __init__(self, dim: int = 12, out: int = 5) -> None:
        super().__init__()
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.gru(x)[0])
        first = logits.new_zeros(x.shape[0], 1, logits.shape[-1])
        return torch.cat([first, logits[:, :-1]], dim=1)


model = ShiftedDecoder().to(device)
out = model(torch.randn(3, 6, 12, device=device))
out.sum().backward()
