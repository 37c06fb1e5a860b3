# Report: https://github.com/awslabs/graphstorm/issues/713
# A link-prediction decoder scores each edge type's edges through its own LayerNorm; the
# sampler draws edges uniformly, so a rare type sometimes gets a single edge, where BatchNorm1d
# would see one value per channel. LayerNorm normalises each edge on its own, so a single edge
# trains. No
# DataLoader is involved: the batch is the one the training loop hands the decoder.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
TYPES = ("cites", "writes", "rare")


class PerTypeDecoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.score = nn.ModuleDict({t: nn.Sequential(nn.Linear(2 * dim, dim), nn.LayerNorm(dim),
                                                     nn.ReLU(), nn.Linear(dim, 1)) for t in TYPES})

    def forward(self, emb, edges):
        return {t: self.score[t](torch.cat([emb[s], emb[d]], 1)).squeeze(1)
                for t, (s, d) in edges.items()}


emb = nn.Parameter(torch.randn(50, 16))
decoder = PerTypeDecoder()
opt = torch.optim.Adam([emb, *decoder.parameters()], lr=0.01)
gen = torch.Generator().manual_seed(1)
for step in range(6):
    counts = {"cites": 24, "writes": 16, "rare": 1 if step == 4 else 3}
    edges = {t: (torch.randint(0, 50, (n,), generator=gen), torch.randint(0, 50, (n,), generator=gen))
             for t, n in counts.items()}
    scores = decoder(emb, edges)
    loss = sum(F.binary_cross_entropy_with_logits(s, torch.ones_like(s)) for s in scores.values())
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained", step + 1, "steps")
