# Modelled on GitHub ariecattan/SciCo#2 (https://github.com/ariecattan/SciCo/issues/2): the
# validation loss is computed on scores that were already turned into probabilities, so
# CrossEntropyLoss applies a second softmax and the validation loss gets stuck near 1.0 while the
# training loss is fine. Here, functions: the model returns a dict whose "scores" a helper
# normalises, training reads the logits, and evaluation (under inference_mode) reads the scores.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(5)
CLASSES = 4


def pair_scores(logits):
    return F.softmax(logits, dim=-1)


class PairClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.GELU())
        self.out = nn.Linear(64, CLASSES)

    def forward(self, a, b):
        logits = self.out(torch.cat([self.encoder(a), self.encoder(b)], dim=-1))
        return {"logits": logits, "scores": pair_scores(logits)}


def make_batch(n=16):
    a, b = torch.randn(n, 16), torch.randn(n, 16)
    return a, b, ((a * b).sum(-1) > 0).long() + 2 * (a.sum(-1) > 0).long()


def train_epoch(model, optimizer, steps=5):
    model.train()
    for _ in range(steps):
        a, b, y = make_batch()
        loss = F.cross_entropy(model(a, b)["logits"], y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.inference_mode()
def evaluate(model, batches=3):
    model.eval()
    losses = []
    for _ in range(batches):
        a, b, y = make_batch()
        losses.append(F.cross_entropy(model(a, b)["logits"], y).item())
    return sum(losses) / len(losses)


model = PairClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for epoch in range(2):
    train_epoch(model, optimizer)
    print(f"epoch {epoch}: val loss {evaluate(model):.3f}")
