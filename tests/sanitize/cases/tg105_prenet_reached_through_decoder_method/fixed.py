# Look-alike for TG105, modelled on NVIDIA/tacotron2#324
# (https://github.com/NVIDIA/tacotron2/issues/324): the pre-net's F.dropout(..., training=True)
# is the Tacotron 2 paper's choice ("dropout with probability 0.5 is applied only to layers in the
# pre-net of the autoregressive decoder" at inference time). At inference the decoder's own
# method calls one step at a time, so the pre-net is the outermost module of that call, yet it
# stays a sub-module of the decoder the run trains and evaluates: its stated choice, silent.
import torch
import torch.nn.functional as F
from torch import nn


class Prenet(nn.Module):
    def __init__(self, in_dim, sizes):
        super().__init__()
        dims = [in_dim] + sizes[:-1]
        self.layers = nn.ModuleList(nn.Linear(i, o, bias=False) for i, o in zip(dims, sizes))

    def forward(self, x):
        for linear in self.layers:
            x = F.dropout(F.relu(linear(x)), p=0.5, training=True)
        return x


class Decoder(nn.Module):
    def __init__(self, n_mels=8, ctx=16, hidden=32):
        super().__init__()
        self.n_mels = n_mels
        self.prenet = Prenet(n_mels, [16, 16])
        self.rnn = nn.LSTMCell(16 + ctx, hidden)
        self.proj = nn.Linear(hidden, n_mels)

    def step(self, frame, context, state):
        h, c = self.rnn(torch.cat([self.prenet(frame), context], -1), state)
        return self.proj(h), (h, c)

    def forward(self, context, mels):
        frame, state, outs = mels.new_zeros(mels.size(0), self.n_mels), None, []
        for t in range(mels.size(1)):
            out, state = self.step(frame, context, state)
            outs.append(out)
            frame = mels[:, t]
        return torch.stack(outs, 1)

    @torch.no_grad()
    def inference(self, context, steps=10):
        frame, state, outs = context.new_zeros(context.size(0), self.n_mels), None, []
        for _ in range(steps):
            frame, state = self.step(frame, context, state)
            outs.append(frame)
        return torch.stack(outs, 1)


torch.manual_seed(0)
decoder = Decoder()
opt = torch.optim.Adam(decoder.parameters(), lr=1e-3)
context, mels = torch.randn(4, 16), torch.randn(4, 6, 8)
for step in range(10):
    decoder.train()
    loss = F.mse_loss(decoder(context, mels), mels)
    opt.zero_grad()
    loss.backward()
    opt.step()
decoder.eval()
print(decoder.inference(context).shape)
