# Fixed twin of buggy.py (https://github.com/tenstorrent/tt-blacksmith/pull/711): the trainer's
# step method zeroes the gradients right after the step.
import torch
import torch.nn.functional as F
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, dim: int = 16, rank: int = 2) -> None:
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.base.requires_grad_(False)
        self.down = nn.Linear(dim, rank, bias=False)
        self.up = nn.Linear(rank, dim, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.base(h) + self.up(self.down(h))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 20, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = LoRALinear(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.block(self.embed(tokens))))


def next_token_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


class Trainer:
    def __init__(self, model: nn.Module, steps: int) -> None:
        self.model = model
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=1e-2)
        self.scheduler = torch.optim.lr_scheduler.LinearLR(self.optimizer, 1.0, 0.1, steps)

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()

    def train_step(self, tokens: torch.Tensor) -> float:
        loss = next_token_loss(self.model, tokens)
        loss.backward()
        self.optimizer_step()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer(TinyLM(), steps=6)
    for step in range(6):
        print(step, trainer.train_step(torch.randint(0, 20, (4, 9))))
