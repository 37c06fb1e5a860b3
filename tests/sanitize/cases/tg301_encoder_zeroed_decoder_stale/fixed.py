# Report: https://github.com/seangal/dcgan_vae_pytorch/issues/4
# Modelled on seangal/dcgan_vae_pytorch#4 (only one of the networks trained by an optimizer is
# zeroed each iteration, so the other one's gradients keep growing): a trainer with an encoder and
# a decoder under one optimizer zeroes the encoder alone. The finding is at that partial
# zero_grad. The fixed twin zeroes through the optimizer, which holds both.
import torch
import torch.nn.functional as F
from torch import nn


class AutoEncoderTrainer:
    def __init__(self) -> None:
        self.encoder = nn.Sequential(nn.Linear(12, 6), nn.Tanh())
        self.decoder = nn.Sequential(nn.Linear(6, 12))
        self.optimizer = torch.optim.SGD([*self.encoder.parameters(),
                                          *self.decoder.parameters()], lr=0.05, momentum=0.9)

    def step(self, x: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.decoder(self.encoder(x)), x)
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
data = torch.randn(128, 12)
trainer = AutoEncoderTrainer()
for epoch in range(2):
    for i in range(0, 128, 32):
        loss = trainer.step(data[i:i + 32])
print(f"loss {loss:.3f}")
