# Report: https://github.com/lyuwenyu/RT-DETR/issues/677
# Modelled on lyuwenyu/RT-DETR#677 (a precomputed tensor kept as a plain attribute instead of a
# registered buffer, so Module._apply never moves or casts it) in a small character model whose
# causal mask is a non-persistent buffer: the serving helper moves the model to the accelerator
# ("meta" stands in for "cuda") and the mask moves with it.
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2, context: int = 24) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / (d // self.heads) ** 0.5
        scores = scores.masked_fill(~self.mask[:t, :t], float("-inf"))
        return self.proj(torch.einsum("bhts,bshd->bthd", scores.softmax(-1), v).reshape(b, t, d))


class CharModel(nn.Module):
    def __init__(self, vocab: int = 20, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = CausalSelfAttention(dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.attn(self.embed(tokens)))


def predict(model: nn.Module, tokens: torch.Tensor, device: torch.device):
    model = model.to(device).eval()
    try:
        with torch.no_grad():
            return model(tokens.to(device)).argmax(-1)
    except RuntimeError as err:
        print(f"prediction failed: {err}")
        return None


torch.manual_seed(0)
model = CharModel()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(4):
    tokens = torch.randint(0, 20, (8, 16))
    loss = nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
answer = predict(model, torch.randint(0, 20, (2, 10)), torch.device("meta"))
print("answer shape:", None if answer is None else tuple(answer.shape))
