# Report: https://github.com/karpathy/nanoGPT/blob/master/train.py
# Modelled on nanoGPT's estimate_loss() (train.py), which brackets its scoring with model.eval()
# and model.train(), written without that switch: a dropout-only character model is scored
# under torch.inference_mode(), and the batches are built inside that mode too, so they are
# inference tensors (no version counter). The
# helper never calls model.eval(), so every scored batch drops a different set of units.
import torch
from torch import nn

torch.manual_seed(0)
text = torch.randint(0, 12, (2000,))


class CharGRU(nn.Module):
    def __init__(self, vocab: int = 12, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(0.3)
        self.rnn = nn.GRU(dim, dim, num_layers=2, dropout=0.3, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.drop(self.embed(x)))
        return self.out(h)


def batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(0, len(text) - 17, (8,), generator=generator)
    chunk = torch.stack([text[s:s + 17] for s in starts])
    return chunk[:, :-1], chunk[:, 1:]


@torch.inference_mode()
def estimate_loss(model: nn.Module) -> float:
    generator = torch.Generator().manual_seed(1)
    total = 0.0  # expect: TG101
    for _ in range(4):
        x, y = batch(generator)
        logits = model(x)
        total += nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
    return total / 4


def main() -> None:
    model = CharGRU()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for step in range(30):
        x, y = batch(generator)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 9:
            print(f"step {step}: val loss {estimate_loss(model):.3f}")


main()
