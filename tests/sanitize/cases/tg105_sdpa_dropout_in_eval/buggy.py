# Modelled on pytorch/pytorch#124464 (https://github.com/pytorch/pytorch/issues/124464):
# F.scaled_dot_product_attention applies dropout_p whatever the calling module's mode, so a
# self-attention block that passes its dropout probability unconditionally keeps dropping
# attention weights after model.eval(), and the validation loss changes from run to run.
import torch
from torch import nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2, attn_dropout: float = 0.2) -> None:
        super().__init__()
        self.heads, self.attn_dropout = heads, attn_dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.attn_dropout)  # expect: TG105
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 20, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = SelfAttention(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        return self.head(h + self.attn(h))


class Trainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def _loss(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self.model(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))

    def train_epoch(self, batches: list) -> None:
        self.model.train()
        for tokens in batches:
            loss = self._loss(tokens)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def validate(self, batches: list) -> float:
        self.model.eval()
        return sum(self._loss(tokens).item() for tokens in batches) / len(batches)


torch.manual_seed(0)
train = [torch.randint(0, 20, (4, 9)) for _ in range(3)]
val = [torch.randint(0, 20, (4, 9)) for _ in range(2)]
trainer = Trainer(TinyLM())
for epoch in range(2):
    trainer.train_epoch(train)
    print(epoch, trainer.validate(val), trainer.validate(val))
