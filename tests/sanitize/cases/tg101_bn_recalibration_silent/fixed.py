# Near-miss, must stay silent. Modelled on csyhhu/L-OBS#14 "Some question about the pytorch
# implementation" (https://github.com/csyhhu/L-OBS/issues/14): after pruning, `adjust_mean_var`
# puts the model in train mode and runs forward passes with no backward, only so that BatchNorm
# re-estimates its running mean and variance; and torch.optim.swa_utils.update_bn
# (https://pytorch.org/docs/stable/optim.html#weight-averaging-swa-and-ema) does the same. The
# outputs feed no metric; the accuracy afterwards is measured in eval mode.
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, update_bn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Activation checkpointing: the block is recomputed in train mode during backward.
        return self.head(checkpoint(self.block, x, use_reentrant=False))


def adjust_mean_var(model: nn.Module, batches: list) -> None:
    model.train()
    with torch.no_grad():
        for x, _ in batches:
            model(x)


def recalibrate_keep_outputs(model: nn.Module, batches: list) -> int:
    model.train()
    seen = 0
    with torch.no_grad():
        for x, _ in batches:
            out = model(x)
            _ = model(x)
            seen += x.shape[0]
    return seen


def accuracy(model: nn.Module, batches: list) -> float:
    model.eval()
    with torch.no_grad():
        hits = sum(int((model(x).argmax(1) == y).sum()) for x, y in batches)
    return hits / sum(len(y) for _, y in batches)


def main() -> None:
    torch.manual_seed(2)
    batches = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(4)]
    model = Net()
    swa_model = AveragedModel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches:
        model.train()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        train_acc = (logits.argmax(1) == y).float().mean().item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        swa_model.update_parameters(model)
    adjust_mean_var(model, batches)
    recalibrate_keep_outputs(model, batches)
    update_bn([x for x, _ in batches], swa_model)
    print(f"train acc {train_acc:.2f}, eval acc {accuracy(model, batches):.2f}, "
          f"swa acc {accuracy(swa_model, batches):.2f}")


if __name__ == "__main__":
    main()
