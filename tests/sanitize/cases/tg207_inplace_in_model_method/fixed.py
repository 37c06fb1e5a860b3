# Fixed twin of buggy.py (https://github.com/orion-orion/FedDCSR/issues/3): the mask is applied
# out of place.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, n_items=50, hidden=16):
        super().__init__()
        self.emb = nn.Embedding(n_items, hidden, padding_idx=0)
        self.norm = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, 2, batch_first=True)
        self.out = nn.Linear(hidden, n_items)

    def log2feats(self, seq):
        keep = (seq != 0).unsqueeze(-1)
        seqs = self.emb(seq) * keep
        q = self.norm(seqs)
        seqs = seqs * keep
        h, _ = self.attn(q, seqs, seqs, need_weights=False)
        return q + h

    def forward(self, seq):
        return self.out(self.log2feats(seq))


model = Encoder()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
seq = torch.randint(0, 50, (8, 10))
target = torch.randint(1, 50, (8, 10))
loss = F.cross_entropy(model(seq).reshape(-1, 50), target.reshape(-1))
optimizer.zero_grad()
loss.backward()
optimizer.step()
