# Correct look-alikes of a weight overwritten in forward (GitHub eladhoffer/quantized.pytorch#12,
# https://github.com/eladhoffer/quantized.pytorch/issues/12): BinaryConnect-style clipping of the
# latent weight to [-1, 1] in forward (which leaves the optimizer's updates alone while the weights
# stay in range), embeddings renormalised through `.data` after each optimizer step (a projection,
# as TransE does), and a manual SGD update through `.data` with no optimizer.
import torch
import torch.nn.functional as F
from torch import nn


class ClippedLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.weight.data = self.weight.data.clamp(-1.0, 1.0)
        w = self.weight + (torch.sign(self.weight) - self.weight).detach()
        return F.linear(x, w, self.bias)


torch.manual_seed(16)
net = nn.Sequential(ClippedLinear(8, 16), nn.ReLU(), ClippedLinear(16, 2))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
entities = nn.Embedding(20, 4)
emb_opt = torch.optim.SGD(entities.parameters(), lr=0.1)
scorer = nn.Linear(4, 1)
for step in range(10):
    x = torch.randn(16, 8)
    loss = F.cross_entropy(net(x), (x[:, 0] > 0).long())
    opt.zero_grad()
    loss.backward()
    opt.step()

    heads, tails = torch.randint(0, 20, (8,)), torch.randint(0, 20, (8,))
    distance = (entities(heads) - entities(tails)).norm(dim=1).mean()
    emb_opt.zero_grad()
    distance.backward()
    emb_opt.step()
    entities.weight.data = F.normalize(entities.weight.data, dim=1)

    score = scorer(torch.randn(8, 4)).pow(2).mean()
    scorer.zero_grad()
    score.backward()
    for p in scorer.parameters():
        p.data = p.data - 0.01 * p.grad
