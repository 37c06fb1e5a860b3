# Report: https://github.com/SamLynnEvans/Transformer/issues/27
# Modelled on SamLynnEvans/Transformer#27 ("trg_mask = trg_mask & np_mask": the no-peek mask
# of a helper is made on the host while the padding mask is on the GPU). A flat script trains a
# tiny causal language model on the accelerator ("meta" stands in for "cuda"); a helper returns
# the causal mask with the count of visible pairs, the caller unpacks both and combines the mask
# with the padding mask outside the model. The error names the combining line; the helper's
# torch.ones, made without a device, is the line to change.
import torch
import torch.nn.functional as F
from torch import nn

DEVICE = torch.device("meta")
PAD, VOCAB, WIDTH, T = 0, 30, 16, 6


def causal_mask(length):
    visible = torch.ones(length, length, dtype=torch.bool).tril()  # expect: TG702
    return visible, length * (length + 1) // 2


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.mix = nn.Linear(WIDTH, WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens, attend):
        h = self.embed(tokens)
        weights = attend.float() / attend.float().sum(-1, keepdim=True).clamp(min=1.0)
        return self.out(torch.relu(self.mix(weights @ h)))


model = TinyLM().to(DEVICE)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
tokens = torch.randint(1, VOCAB, (4, T + 1), device=DEVICE)
keep = tokens[:, :-1] != PAD
future, pairs = causal_mask(T)
attend = keep[:, None, :] & future
logits = model(tokens[:, :-1], attend)
loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
loss.backward()
opt.step()
print(f"{pairs} visible pairs per sequence")
