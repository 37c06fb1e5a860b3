# Modelled on NVIDIA/tacotron2#247 (https://github.com/NVIDIA/tacotron2/issues/247) and
# BogiHsu/Tacotron2-PyTorch#8 (https://github.com/BogiHsu/Tacotron2-PyTorch/issues/8): Tacotron 2's
# pre-net keeps its dropout on at inference on purpose (`F.dropout(..., training=True)`), while
# the decoder's other functional dropouts follow the mode (`training=self.training`). The author
# knows the convention, so the literal True is a choice: a correct program that stays silent.
import torch
import torch.nn.functional as F
from torch import nn


class PreNet(nn.Module):
    def __init__(self, n_in, sizes=(32, 32)):
        super().__init__()
        dims = [n_in, *sizes]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x):
        for linear in self.layers:
            x = F.dropout(F.relu(linear(x)), p=0.5, training=True)
        return x


class Decoder(nn.Module):
    def __init__(self, n_mels=8, hidden=32, p_hidden=0.1):
        super().__init__()
        self.prenet = PreNet(n_mels)
        self.cell = nn.GRUCell(32, hidden)
        self.proj = nn.Linear(hidden, n_mels)
        self.p_hidden = p_hidden
        self.n_mels = n_mels

    def forward(self, frames):
        h = frames.new_zeros(frames.shape[0], self.cell.hidden_size)
        outputs = []
        for t in range(frames.shape[1]):
            h = self.cell(self.prenet(frames[:, t]), h)
            h = F.dropout(h, self.p_hidden, self.training)
            outputs.append(self.proj(h))
        return torch.stack(outputs, 1)

    def inference(self, steps, batch=2):
        frame = torch.zeros(batch, self.n_mels)
        h = torch.zeros(batch, self.cell.hidden_size)
        outputs = []
        for _ in range(steps):
            h = self.cell(self.prenet(frame), h)
            h = F.dropout(h, self.p_hidden, self.training)
            frame = self.proj(h)
            outputs.append(frame)
        return torch.stack(outputs, 1)


if __name__ == "__main__":
    torch.manual_seed(0)
    decoder = Decoder()
    optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
    mels = torch.randn(4, 6, 8)
    for step in range(3):
        teacher = torch.cat([torch.zeros(4, 1, 8), mels[:, :-1]], 1)
        loss = F.mse_loss(decoder(teacher), mels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    decoder.eval()
    with torch.no_grad():
        print(decoder(torch.cat([torch.zeros(4, 1, 8), mels[:, :-1]], 1)).shape)
        print(decoder.inference(5).shape)
