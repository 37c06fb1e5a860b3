# Modelled on the PyTorch FAQ "My model reports cuda runtime error(2): out of memory"
# (https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory):
# `total_loss += loss` accumulates history across the training loop. Here the model returns its
# own output record (a dataclass holding the loss and the logits, as question-answering heads
# do), and the loop adds `out.loss` itself, graph and all, to the epoch's total.
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class SpanOutput:
    loss: torch.Tensor
    start_logits: torch.Tensor


class SpanHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 24), nn.ReLU())
        self.start = nn.Linear(24, 1)

    def forward(self, tokens, start_positions):
        logits = self.start(self.encoder(tokens)).squeeze(-1)
        return SpanOutput(F.cross_entropy(logits, start_positions), logits)


torch.manual_seed(0)
model = SpanHead()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(2):
    train_loss = 0
    for step in range(10):
        out = model(torch.randn(4, 10, 12), torch.randint(0, 10, (4,)))
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        train_loss += out.loss  # expect: TG201
    print(f"epoch {epoch}: mean loss {train_loss.item() / 10:.3f}")
