# Report: https://github.com/pytorch/pytorch/issues/64586
# Modelled on pytorch/pytorch#64586 (memory grows every iteration of a gradient-penalty GAN; it
# looked like a leak in torch.autograd.grad until the penalty was logged with .item()). Here a
# discriminator gets an R1 penalty on real samples, computed with autograd.grad(create_graph=True);
# the penalty tensor goes into a log dict of lists. Its graph is the double-backward graph, which
# reaches no module output, and the entry before it in the log is a float.
import torch
from torch import nn

torch.manual_seed(0)

gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
disc = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
softplus = nn.functional.softplus
logs = {"d_loss": [], "r1": [], "g_loss": []}

for it in range(12):
    real = torch.randn(64, 2) * 0.5 + 1.0
    real.requires_grad_(True)
    fake = gen(torch.randn(64, 8))

    real_score = disc(real)
    (grad_real,) = torch.autograd.grad(real_score.sum(), real, create_graph=True)
    r1 = grad_real.pow(2).sum(dim=1).mean()
    d_loss = softplus(-real_score).mean() + softplus(disc(fake.detach())).mean() + 5.0 * r1
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()

    g_loss = softplus(-disc(fake)).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()

    logs["d_loss"].append(d_loss.item())
    logs["r1"].append(r1)  # expect: TG201
    logs["g_loss"].append(g_loss.item())

print("last r1", float(logs["r1"][-1]))
