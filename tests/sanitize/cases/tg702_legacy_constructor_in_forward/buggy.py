# Modelled on pytorch/pytorch#20122 (https://github.com/pytorch/pytorch/issues/20122, "Is the
# `device=` parameter required in torch.FloatTensor"): the legacy type constructors
# (torch.FloatTensor, torch.LongTensor, torch.Tensor) always allocate on the CPU and refuse any
# other device. A decoder's forward prepends a start column built with torch.FloatTensor to its
# outputs, so once the model runs on the accelerator the concatenation meets a CPU tensor. The
# "meta" device stands in for "cuda" so that the case runs on any machine.
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
        first = torch.FloatTensor(x.shape[0], 1, logits.shape[-1]).zero_()  # expect: TG702
        return torch.cat([first, logits[:, :-1]], dim=1)


model = ShiftedDecoder().to(device)
out = model(torch.randn(3, 6, 12, device=device))
out.sum().backward()
