# Modelled on GitHub pykeen/pykeen#113 (https://github.com/pykeen/pykeen/pull/113): a ConvE-style
# scorer with BatchNorm1d trains on 129 triples in batches of 16, so each epoch ends with a batch
# of one; the training function catches the ValueError, logs it and stops the epoch early, so the
# run "finishes" having skipped part of every epoch.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Scorer(nn.Module):
    def __init__(self, n_entities: int = 20, dim: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(n_entities, dim)
        self.fc = nn.Linear(dim, dim)
        self.bn = nn.BatchNorm1d(dim)
        self.out = nn.Linear(dim, n_entities)

    def forward(self, heads: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.bn(self.fc(self.emb(heads)))))


def train_epoch(model, loader, optimizer) -> int:
    done = 0
    for (triples,) in loader:
        try:
            logits = model(triples[:, 0])
        except ValueError as err:
            print(f"stopping epoch early: {err}")
            break
        loss = F.cross_entropy(logits, triples[:, 1])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        done += 1
    return done


triples = torch.randint(0, 20, (129, 2))
loader = DataLoader(TensorDataset(triples), batch_size=16, shuffle=True)  # expect: TG404
model = Scorer()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(2):
    print(epoch, train_epoch(model, loader, optimizer))
