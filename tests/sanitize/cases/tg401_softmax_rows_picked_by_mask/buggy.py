# Modelled on GitHub gitabcworld/MatchingNetworks#5
# (https://github.com/gitabcworld/MatchingNetworks/issues/5): the attention over the support set
# applies softmax to the similarities, and the loss later gives them to cross_entropy, which
# applies log_softmax again. Here, the episodes are padded to a fixed number of queries and the
# real ones are picked with a boolean mask before the loss, so the loss's input is an index of
# the softmax output, not the softmax output itself.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)
WAYS, SHOTS, QUERIES, DIM = 5, 2, 6, 12


class Matcher(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, 16))

    def forward(self, support, query):
        s = F.normalize(self.embed(support), dim=-1)  # (B, WAYS*SHOTS, 16)
        q = F.normalize(self.embed(query), dim=-1)  # (B, QUERIES, 16)
        sims = q @ s.transpose(1, 2)  # (B, QUERIES, WAYS*SHOTS)
        return sims.reshape(*sims.shape[:2], WAYS, SHOTS).mean(-1) * 10.0


def episode(batch=4):
    protos = torch.randn(batch, WAYS, DIM)
    support = protos.repeat_interleave(SHOTS, 1) + 0.3 * torch.randn(batch, WAYS * SHOTS, DIM)
    labels = torch.randint(0, WAYS, (batch, QUERIES))
    query = protos.gather(1, labels[..., None].expand(-1, -1, DIM)) + 0.3 * torch.randn(
        batch, QUERIES, DIM)
    real = torch.arange(QUERIES)[None] < torch.randint(2, QUERIES + 1, (batch, 1))
    return support, query, labels, real


model = Matcher()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    support, query, labels, real = episode()
    attention = F.softmax(model(support, query), dim=-1)  # expect: TG401
    loss = F.cross_entropy(attention[real], labels[real])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
