# Modelled on GitHub tenstorrent/tt-blacksmith#711
# (https://github.com/tenstorrent/tt-blacksmith/pull/711): a trainer for a language model forgot to
# zero the gradients after each optimizer step. Here, functions: a helper runs the backward and
# clips, another applies the update and the schedule, and the loop between them never zeroes, so
# each update uses the sum of every earlier batch's gradients.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(9)
VOCAB, DIM = 20, 24


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.LSTM(DIM, DIM, batch_first=True)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.out(hidden)


def backward_and_clip(loss, model, max_norm=1.0):
    loss.backward()
    return nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def apply_update(optimizer, scheduler):
    optimizer.step()
    scheduler.step()


def train(model, steps=8):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    for step in range(steps):
        tokens = torch.randint(0, VOCAB, (4, 12))
        logits = model(tokens[:, :-1])  # expect: TG301
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        norm = backward_and_clip(loss, model)
        apply_update(optimizer, scheduler)
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.3f} grad norm {norm:.3f}")


train(TinyLM())
