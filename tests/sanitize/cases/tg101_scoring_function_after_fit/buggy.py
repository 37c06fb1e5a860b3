# Modelled on kexinhuang12345/MolTrans#22 (https://github.com/kexinhuang12345/MolTrans/issues/22):
# a trained drug-target model gave different scores for the same pairs on every call because the
# inference code never called model.eval(). Here fit() sets training mode itself, and the scoring
# function used after training runs under no_grad and returns the top-ranked targets (no metric,
# no loss): Dropout and BatchNorm still behave as in training.
import torch
from torch import nn
import torch.nn.functional as F


class PairScorer(nn.Module):
    def __init__(self, dim: int = 12) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * dim, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Dropout(0.3), nn.Linear(32, 1))

    def forward(self, drug: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([drug, target], dim=-1)).squeeze(-1)


def fit(model: nn.Module, pairs: list, epochs: int = 3) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    for _ in range(epochs):
        for drug, target, bound in pairs:
            loss = F.binary_cross_entropy_with_logits(model(drug, target), bound)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def top_targets(model: nn.Module, drug: torch.Tensor, targets: torch.Tensor, k: int = 3):
    with torch.no_grad():  # expect: TG101
        scores = model(drug.expand(len(targets), -1), targets)
    return scores.topk(k).indices.tolist()


def main() -> None:
    torch.manual_seed(0)
    pairs = [(torch.randn(8, 12), torch.randn(8, 12), torch.randint(0, 2, (8,)).float())
             for _ in range(4)]
    model = PairScorer()
    fit(model, pairs)
    print("top targets:", top_targets(model, torch.randn(1, 12), torch.randn(10, 12)))


if __name__ == "__main__":
    main()
