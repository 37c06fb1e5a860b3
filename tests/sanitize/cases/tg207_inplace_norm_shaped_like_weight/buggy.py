# Modelled on GitHub Seanny123/da-rnn#14 (https://github.com/Seanny123/da-rnn/issues/14): an
# in-place update of a tensor autograd saved makes backward fail with "modified by an inplace
# operation". Here an L2-normalised embedding is divided in place although pow() saved it; the
# embedding (32, 8) has the shape of the last layer's weight saved transposed, and the same
# version (the weight's initialisation bumped it once), yet the tensor is the activation.
import torch
from torch import nn


class Embedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
        self.l2 = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if self.l2:
            out /= out.pow(2).sum(1, keepdim=True).sqrt()  # expect: TG207
        return out


class PairTrainer:
    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def fit(self, steps: int) -> None:
        for step in range(steps):
            emb = self.model(torch.randn(32, 16))
            loss = (emb[0::2] - emb[1::2]).pow(2).sum(1).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


torch.manual_seed(13)
PairTrainer(Embedder()).fit(3)
