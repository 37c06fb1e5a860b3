# Report: https://github.com/KevinMusgrave/pytorch-metric-learning/issues/107
# A triplet loss module, handed the miner's triplets as a tuple, averages over the triplets that
# violate the margin; when a batch has none (here the classes are far apart from the start), the
# count is 0 and sum / count is 0 / 0 = NaN. The division inside the loss module is the line.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class TripletLoss(nn.Module):
    def __init__(self, margin=0.2):
        super().__init__()
        self.margin = margin

    def forward(self, emb, labels, indices):
        anchor, positive, negative = indices  # the miner's triplets
        emb = F.normalize(emb, dim=1)
        d_ap = (emb[anchor] - emb[positive]).norm(dim=1)
        d_an = (emb[anchor] - emb[negative]).norm(dim=1)
        violations = F.relu(d_ap - d_an + self.margin)
        active = int((violations > 0).sum())
        return violations.sum() / active  # expect: TG405


def mine(labels):
    same = labels[:, None] == labels[None, :]
    a, p, n = [], [], []
    for i in range(len(labels)):
        for j in torch.nonzero(same[i]).flatten().tolist():
            for k in torch.nonzero(~same[i]).flatten().tolist():
                if i != j:
                    a.append(i), p.append(j), n.append(k)
    return torch.tensor(a), torch.tensor(p), torch.tensor(n)


net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
loss_fn = TripletLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
centers = torch.eye(4) * 6.0
for step in range(40):
    labels = torch.arange(4).repeat(4)
    x = centers[labels] + 0.05 * torch.randn(16, 4)
    loss = loss_fn(net(x), labels, mine(labels))
    if not torch.isfinite(loss):
        print("non-finite loss at step", step)
        break
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
