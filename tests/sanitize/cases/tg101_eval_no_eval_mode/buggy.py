# Modelled on "Why does the accuracy fluctuate widely after using batch normalization"
# (https://techqa.club/v/q/why-does-the-accuracy-fluctuate-widely-after-using-batch-normalization-74946623):
# the evaluation function runs the model without model.eval(), so Dropout drops and BatchNorm
# normalises with (and updates) the evaluation batch's statistics.
import torch
import torch.nn.functional as F
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(16, 3))


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():  # expect: TG101
        logits = model(x)
        loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    return loss, accuracy


def main() -> None:
    torch.manual_seed(3)
    x, y = torch.randn(48, 6), torch.randint(0, 3, (48,))
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        model.train()
        for start in range(0, 48, 16):
            optimizer.zero_grad()
            loss = criterion(model(x[start:start + 16]), y[start:start + 16])
            loss.backward()
            optimizer.step()
        print(epoch, evaluate(model, x, y))


if __name__ == "__main__":
    main()
