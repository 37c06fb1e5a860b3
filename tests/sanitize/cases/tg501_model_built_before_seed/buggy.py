# Report: https://github.com/SmartDataAnalytics/PyKEEN/issues/49
# Modelled on SmartDataAnalytics/PyKEEN#49 ("random_seed parameter is not working properly"): a
# knowledge-graph embedding pipeline builds the model first and only then calls the training
# function, which seeds numpy and torch before its loop. The embeddings were already drawn from
# torch's unseeded generator, so two runs with the same seed train from different weights. The
# fixed twin seeds before the model is built.
import numpy as np
import torch
from torch import nn


class DistMult(nn.Module):
    def __init__(self, entities: int, relations: int, dim: int = 16) -> None:
        super().__init__()
        self.entity = nn.Embedding(entities, dim)
        self.relation = nn.Embedding(relations, dim)

    def forward(self, triples: torch.Tensor) -> torch.Tensor:
        h, r, t = self.entity(triples[:, 0]), self.relation(triples[:, 1]), \
            self.entity(triples[:, 2])
        return (h * r * t).sum(-1)


def train_kge(model: nn.Module, triples: torch.Tensor, seed: int, epochs: int = 5) -> float:
    np.random.seed(seed)
    torch.manual_seed(seed)  # expect: TG501
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    entities = model.entity.num_embeddings
    for epoch in range(epochs):
        for batch in triples[torch.randperm(len(triples))].split(32):
            corrupt = batch.clone()
            corrupt[:, 2] = torch.randint(0, entities, (len(batch),))
            margin = 1.0 - model(batch) + model(corrupt)
            loss = margin.clamp(min=0).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def pipeline(seed: int = 2) -> float:
    triples = torch.stack([torch.arange(100) % 40, torch.arange(100) % 5,
                           (torch.arange(100) * 7) % 40], 1)
    model = DistMult(entities=40, relations=5)
    return train_kge(model, triples, seed)


print(f"final margin loss {pipeline():.4f}")
