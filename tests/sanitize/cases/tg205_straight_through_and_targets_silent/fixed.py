# Correct look-alikes of a cut loss term (GitHub yifita/deep_cage#16,
# https://github.com/yifita/deep_cage/issues/16): a straight-through estimator
# (x + (q - x).detach()), VQ-VAE codebook and commitment terms on detached targets, a
# distillation term against a frozen teacher run under no_grad, a TD target built from a detached
# target network, and a running total started at zero. Every term moves some parameter.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(9)


class VectorQuantizer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Linear(6, 4)
        self.decode = nn.Linear(4, 6)
        self.codebook = nn.Parameter(torch.randn(8, 4))

    def forward(self, x):
        z = self.encode(x)
        q = self.codebook[torch.cdist(z, self.codebook).argmin(1)]
        z_q = z + (q - z).detach()
        return self.decode(z_q), z, q


vq = VectorQuantizer()
vq_opt = torch.optim.Adam(vq.parameters(), lr=1e-3)
teacher, student = nn.Linear(6, 3).requires_grad_(False), nn.Linear(6, 3)
kd_opt = torch.optim.SGD(student.parameters(), lr=0.1)
online, target_net = nn.Linear(4, 2), nn.Linear(4, 2)
td_opt = torch.optim.SGD(online.parameters(), lr=0.01)
for step in range(5):
    x = torch.randn(16, 6)
    out, z, q = vq(x)
    loss = F.mse_loss(out, x) + F.mse_loss(q, z.detach()) + 0.25 * F.mse_loss(z, q.detach())
    vq_opt.zero_grad()
    loss.backward()
    vq_opt.step()

    labels = torch.randint(0, 3, (16,))
    with torch.no_grad():
        soft = F.softmax(teacher(x) / 2, dim=1)
    logits = student(x)
    kd = F.cross_entropy(logits, labels) + F.kl_div(F.log_softmax(logits / 2, dim=1), soft,
                                                    reduction="batchmean")
    kd_opt.zero_grad()
    kd.backward()
    kd_opt.step()

    s, r = torch.randn(8, 4), torch.randn(8)
    td_target = r + 0.9 * target_net(s).max(1).values.detach()
    total = torch.zeros(())
    total = total + F.smooth_l1_loss(online(s).max(1).values, td_target)
    td_opt.zero_grad()
    total.backward()
    td_opt.step()
