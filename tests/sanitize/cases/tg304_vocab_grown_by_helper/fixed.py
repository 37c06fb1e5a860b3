# Modelled on microsoft/nni#4521 "The parameters are not updated when the pruned model is
# finetuned" (https://github.com/microsoft/nni/issues/4521): a helper replaces layers of a model
# whose optimizer already exists, and the maintainers' answer is that "the parameters registered
# in the optimizer are outdated ... an easy way is reinitializing a new optimizer". Here a text
# classifier's vocabulary grows mid-training: grow_vocab() swaps in a larger nn.Embedding. The
# line to change is the call in train(), where the optimizer lives, not the helper's assignment.
# Fixed twin: train() rebuilds the optimizer after the vocabulary grows.
import torch
import torch.nn.functional as F
from torch import nn


class BagClassifier(nn.Module):
    def __init__(self, vocab, dim=16, classes=3):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.out(self.embed(tokens))


def grow_vocab(model, extra):
    old = model.embed
    new = nn.EmbeddingBag(old.num_embeddings + extra, old.embedding_dim)
    with torch.no_grad():
        new.weight[: old.num_embeddings] = old.weight
    model.embed = new
    return model


def batches(vocab, n, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, vocab, (8, 10), generator=g), torch.randint(0, 3, (8,), generator=g))
            for _ in range(n)]


def train(model, steps, vocab):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for phase in range(2):
        if phase == 1:
            model = grow_vocab(model, 20)
            vocab += 20
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for tokens, labels in batches(vocab, steps, phase):
            loss = F.cross_entropy(model(tokens), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    classifier = BagClassifier(30)
    print(train(classifier, 4, 30), classifier.embed.num_embeddings)
