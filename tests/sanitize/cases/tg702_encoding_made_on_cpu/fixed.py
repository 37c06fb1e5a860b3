# Modelled on tatp22/multidim-positional-encoding#33
# (https://github.com/tatp22/multidim-positional-encoding/issues/33): "the positional encoding is
# on device 'cpu' while my patch embedding is on device 'cuda:0', so the positional encoding can't
# be added to the patch embedding in the Summer class"; the fix was `tensor + penc.to(
# tensor.device)` where the two are added. The encoding module builds its table with
# torch.arange and no device; the `meta` device stands for the GPU. The error names no tensor
# and no name holds the encoding: the finding points at the failing addition in the model's
# forward, not at the training loop's model call, whose error the loop catches and skips.
# Fixed: the encoding is moved to the input's device where it is added.
import torch
from torch import nn


class PositionalEncoding1D(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.channels = channels

    def forward(self, tensor):
        pos = torch.arange(tensor.shape[1], dtype=torch.float32)
        freq = 1.0 / (10000 ** (torch.arange(0, self.channels, 2).float() / self.channels))
        angles = pos[:, None] * freq[None, :]
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


class PatchTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(12, 8)
        self.penc = PositionalEncoding1D(8)
        self.head = nn.Linear(8, 3)

    def forward(self, patches):
        x = self.embed(patches) + self.penc(patches).to(patches.device)
        return self.head(torch.relu(x))


device = torch.device("meta")
model = PatchTagger().to(device)
patches = torch.randn(2, 5, 12, device=device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    try:
        loss = model(patches).sum()
    except RuntimeError as err:  # a batch that fails is skipped, and the run goes on
        print(f"step {step}: skipped ({err})")
        continue
    opt.zero_grad()
    loss.backward()
    opt.step()
