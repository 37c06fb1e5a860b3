# Fixed twin of buggy.py (https://github.com/speechbrain/speechbrain/pull/184): a small constant
# keeps the power's input off 0, where the derivative of x ** 0.5 is infinite.
import torch
from torch import nn


class DenoiseTrainer:
    def __init__(self, frame=16):
        self.net = nn.Sequential(nn.Linear(2 * frame, 64), nn.Tanh(), nn.Linear(64, 2 * frame))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.frame = frame

    def magnitude(self, spec):
        re, im = spec[..., :self.frame], spec[..., self.frame:]
        return (re * re + im * im + 1e-8).pow(0.5)

    def step(self, noisy, clean, keep):
        estimate = self.net(noisy) * keep
        loss = (self.magnitude(estimate) - self.magnitude(clean)).abs().mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


torch.manual_seed(2)
trainer = DenoiseTrainer()
keep = torch.ones(6, 32)
keep[3:] = 0.0  # padded clips
for _ in range(3):
    clean = torch.randn(6, 32) * keep
    trainer.step(clean + 0.1 * torch.randn(6, 32), clean, keep)
print("weights finite:", all(bool(torch.isfinite(p).all()) for p in trainer.net.parameters()))
