# Modelled on neosr-project/neosr#31 (https://github.com/neosr-project/neosr/pull/31), which split
# one GradScaler into two, "one for the generator, the other for the discriminator". Here the
# discriminator's update unscales before clipping, as the AMP recipe says; the generator's clips
# its gradients while they are still multiplied by its own scaler's scale, so its max_norm of 1.0
# cuts every update to a sliver. The clip is checked against the scaler that scaled that loss.
import torch
from torch import nn

torch.manual_seed(3)
gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
disc = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
scaler_d = torch.amp.GradScaler("cpu")
scaler_g = torch.amp.GradScaler("cpu")
bce = nn.BCEWithLogitsLoss()
real = torch.randn(64, 16)
for step in range(4):
    z = torch.randn(64, 8)
    opt_d.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fake = gen(z)
        d_loss = bce(disc(real).float(), torch.ones(64, 1)) + \
            bce(disc(fake.detach()).float(), torch.zeros(64, 1))
    scaler_d.scale(d_loss).backward()
    scaler_d.unscale_(opt_d)
    torch.nn.utils.clip_grad_norm_(disc.parameters(), max_norm=1.0)
    scaler_d.step(opt_d)
    scaler_d.update()

    opt_g.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        g_loss = bce(disc(gen(z)).float(), torch.ones(64, 1))
    scaler_g.scale(g_loss).backward()
    torch.nn.utils.clip_grad_norm_(gen.parameters(), max_norm=1.0)  # expect: TG306
    scaler_g.step(opt_g)
    scaler_g.update()
print(f"d {d_loss.item():.3f} g {g_loss.item():.3f}")
