# Report: https://github.com/the-matter-lab/Pasithea/issues/3
# Modelled on the-matter-lab/Pasithea#3 ("Expected all tensors to be on the same device";
# fixed by giving the tensor made with `rand(hot.shape)` a device): a sequence tagger keeps
# its lengths on the CPU, as pack_padded_sequence wants, while the batch and the model are on
# the accelerator (`meta` stands in for it). forward builds position features with
# torch.arange and no device and hands them to a scoring submodule, whose torch.cat fails.
# The factory in the outer forward is the line to change, not the cat that fails.
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence


class Scorer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.out = nn.Linear(width + 1, 3)

    def forward(self, feats: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        return self.out(torch.cat([feats, where.unsqueeze(-1)], dim=-1))


class Tagger(nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.rnn = nn.GRU(5, width, batch_first=True)
        self.score = Scorer(width)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(tokens, lengths, batch_first=True, enforce_sorted=False)
        feats = self.rnn(packed)[1][-1].unsqueeze(1).expand(-1, tokens.shape[1], -1)
        steps = tokens.shape[1]
        where = torch.arange(steps, dtype=torch.float32).repeat(len(lengths), 1)  # expect: TG702
        return self.score(feats, where)


device = torch.device("meta")
model = Tagger().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
tokens = torch.randn(4, 6, 5, device=device)
lengths = torch.tensor([6, 4, 5, 2])
opt.zero_grad()
model(tokens, lengths).sum().backward()
opt.step()
