# Report: https://github.com/isayev/ReLeaSE/issues/39
# Modelled on GitHub isayev/ReLeaSE#39 (a loss rebuilt through .item() left every gradient None):
# a contrastive image-text model learns its temperature with its own optimizer, but the helper
# that scales the similarities rebuilds the temperature as a new tensor from .item(), so the
# temperature never receives a gradient while the encoders train; its optimizer steps on nothing.
import math

import torch
import torch.nn.functional as F
from torch import nn


class Encoders(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image = nn.Linear(32, 16)
        self.text = nn.Linear(24, 16)

    def forward(self, images, texts):
        return F.normalize(self.image(images), dim=1), F.normalize(self.text(texts), dim=1)


class Temperature(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, similarities):
        scale = torch.tensor(self.log_scale.exp().item())  # expect: TG205
        return similarities * scale


torch.manual_seed(11)
encoders, temperature = Encoders(), Temperature()
enc_opt = torch.optim.Adam(encoders.parameters(), lr=1e-3)
temp_opt = torch.optim.Adam(temperature.parameters(), lr=1e-2)
for step in range(6):
    images, texts = torch.randn(8, 32), torch.randn(8, 24)
    img, txt = encoders(images, texts)
    logits = temperature(img @ txt.T)
    labels = torch.arange(8)
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
    enc_opt.zero_grad()
    temp_opt.zero_grad()
    loss.backward()
    enc_opt.step()
    temp_opt.step()
print(f"loss {loss.item():.3f} scale {temperature.log_scale.exp().item():.2f}")
