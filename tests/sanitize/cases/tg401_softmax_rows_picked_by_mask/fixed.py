# Fixed twin of buggy.py (https://github.com/gitabcworld/MatchingNetworks/issues/5): the loss
# gets the masked similarities (logits); softmax is applied only for the accuracy.
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
    scores = model(support, query)
    loss = F.cross_entropy(scores[real], labels[real])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    picked = F.softmax(scores.detach(), dim=-1)[real]
    accuracy = (picked.argmax(-1) == labels[real]).float().mean()
print(f"loss {loss.item():.3f} accuracy {accuracy:.2f}")
