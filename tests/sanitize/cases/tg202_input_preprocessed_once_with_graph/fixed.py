# Modelled on GitHub lucidrains/denoising-diffusion-pytorch#109
# (https://github.com/lucidrains/denoising-diffusion-pytorch/issues/109): the training sequences
# are made once, before training, by passing raw signals through a Conv1d; the result keeps that
# call's graph, so the second step's backward runs through saved tensors the first one freed
# ("Trying to backward through the graph a second time"). The data must be made without a graph.
import torch
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module, data: torch.Tensor, steps: int) -> None:
        self.model, self.data, self.steps = model, data, steps
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(self) -> None:
        for step in range(self.steps):
            batch = self.data[step % 4 * 8:(step % 4 + 1) * 8]
            loss = self.model(batch).pow(2).mean()
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()


torch.manual_seed(0)
raw = torch.randn(32, 3, 16)
to_channels = nn.Conv1d(3, 4, kernel_size=1)
with torch.no_grad():
    sequences = to_channels(raw)
Trainer(nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, 4, 1)),
        sequences, steps=4).train()
print("trained")
