# Modelled on GitHub ariecattan/SciCo#2 (https://github.com/ariecattan/SciCo/issues/2): the
# evaluation turns the scores into probabilities for its metrics and then gives the same
# probabilities to CrossEntropyLoss, which applies a second softmax, so the validation loss gets
# stuck near 1.0 while the training loss is fine. Here, functions: a pair classifier trained on
# logits and evaluated under inference_mode.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(5)
CLASSES = 4


class PairClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.GELU())
        self.out = nn.Linear(64, CLASSES)

    def forward(self, a, b):
        return self.out(torch.cat([self.encoder(a), self.encoder(b)], dim=-1))


def make_batch(n=16):
    a, b = torch.randn(n, 16), torch.randn(n, 16)
    return a, b, ((a * b).sum(-1) > 0).long() + 2 * (a.sum(-1) > 0).long()


def train_epoch(model, optimizer, steps=5):
    model.train()
    for _ in range(steps):
        a, b, y = make_batch()
        loss = F.cross_entropy(model(a, b), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.inference_mode()
def evaluate(model, batches=3):
    model.eval()
    losses, correct = [], 0
    for _ in range(batches):
        a, b, y = make_batch()
        scores = model(a, b)
        scores = scores.softmax(dim=-1)  # expect: TG401
        correct += int((scores.argmax(-1) == y).sum())
        losses.append(F.cross_entropy(scores, y).item())
    return sum(losses) / len(losses), correct / (16 * batches)


model = PairClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for epoch in range(2):
    train_epoch(model, optimizer)
    print("epoch", epoch, evaluate(model))
