# Report: https://github.com/bytetriper/RAE/issues/67
# Modelled on bytetriper/RAE#67 ("zero_grad is called per microbatch, breaking gradient
# accumulation") and pytorch/torchtitan#3575 (zeroing "at fwd/bwd instead of optimizer step"): a
# trainer splits each batch into micro-batches and zeroes the gradients at the top of the
# micro-batch loop, so every backward but the last is thrown away before the step. The fixed
# twin zeroes once, before the micro-batch loop.
import torch
import torch.nn.functional as F
from torch import nn


class TinyTagger(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 16, tags: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=32, dropout=0.0,
                                              batch_first=True)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.mix(self.embed(tokens)))


class Trainer:
    def __init__(self, micro_batches: int) -> None:
        self.model = TinyTagger()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.micro_batches = micro_batches

    def train_step(self, tokens: torch.Tensor, tags: torch.Tensor) -> float:
        total = 0.0
        for chunk, target in zip(tokens.chunk(self.micro_batches), tags.chunk(self.micro_batches)):
            self.optimizer.zero_grad()  # expect: TG302
            logits = self.model(chunk)
            loss = F.cross_entropy(logits.flatten(0, 1), target.flatten()) / self.micro_batches
            loss.backward()
            total += loss.item()
        self.optimizer.step()
        return total


torch.manual_seed(0)
trainer = Trainer(micro_batches=4)
tokens = torch.randint(0, 50, (32, 6))
tags = tokens % 5
for epoch in range(4):
    loss = trainer.train_step(tokens, tags)
print(f"loss {loss:.3f}")
