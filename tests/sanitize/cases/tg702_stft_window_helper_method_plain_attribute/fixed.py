# Report: https://github.com/pytorch/audio/pull/457
# Modelled on pytorch/audio#457 ("phase_advance should be a buffer so it moves device
# correctly"): a spectrogram front end keeps its analysis window as a plain tensor attribute, so
# `.to(device)` on the model leaves the window behind. Here the front end is not called as a
# module: the keyword spotter's forward calls its `frames()` helper method directly, and the
# window is multiplied into the moved audio there. The store of the window is the line to change;
# "meta" stands in for "cuda" so that the case runs on any machine.
import torch
from torch import nn


class FrameCutter(nn.Module):
    def __init__(self, width: int = 32, hop: int = 16) -> None:
        super().__init__()
        self.width, self.hop = width, hop
        self.register_buffer("window", torch.hann_window(width), persistent=False)

    def frames(self, audio: torch.Tensor) -> torch.Tensor:
        chunks = audio.unfold(-1, self.width, self.hop)  # (N, frames, width)
        return chunks * self.window


class KeywordSpotter(nn.Module):
    def __init__(self, words: int = 4) -> None:
        super().__init__()
        self.cutter = FrameCutter()
        self.proj = nn.Linear(32, 24)
        self.head = nn.Linear(24, words)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        feats = torch.relu(self.proj(self.cutter.frames(audio)))
        return self.head(feats.mean(1))


def fit(device: torch.device, rounds: int = 3) -> None:
    spotter = KeywordSpotter().to(device)
    opt = torch.optim.SGD(spotter.parameters(), lr=0.1)
    for _ in range(rounds):
        audio = torch.randn(6, 256, device=device)
        words = torch.randint(0, 4, (6,), device=device)
        loss = nn.functional.cross_entropy(spotter(audio), words)
        opt.zero_grad()
        loss.backward()
        opt.step()


torch.manual_seed(0)
fit(torch.device("meta"))
