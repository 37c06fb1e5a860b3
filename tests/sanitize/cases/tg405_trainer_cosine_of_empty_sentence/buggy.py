# Modelled on GitHub huggingface/sentence-transformers#625
# (https://github.com/huggingface/sentence-transformers/issues/625): averaged word embeddings of a
# sentence made only of unknown words are a zero vector, and a cosine similarity that divides by the
# norm without an epsilon turns it into NaN. Here, a class-based trainer of a bag-of-words sentence
# encoder with a cosine regression loss; some sentence pairs contain only padding tokens.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)
VOCAB, DIM, PAD = 50, 16, 0


class BagEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, DIM, mode="mean", padding_idx=PAD)
        self.proj = nn.Linear(DIM, DIM, bias=False)

    def forward(self, tokens):
        return self.proj(self.embed(tokens))


class PairTrainer:
    def __init__(self):
        self.model = BagEncoder()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def cosine(self, a, b):
        a = a / a.norm(dim=1, keepdim=True)  # expect: TG405
        b = b / b.norm(dim=1, keepdim=True)
        return (a * b).sum(1)

    def batch(self):
        left = torch.randint(1, VOCAB, (8, 6))
        right = torch.randint(1, VOCAB, (8, 6))
        left[3] = PAD  # a sentence of unknown words only
        return left, right, torch.rand(8)

    def step(self):
        left, right, score = self.batch()
        loss = F.mse_loss(self.cosine(self.model(left), self.model(right)), score)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


trainer = PairTrainer()
print([round(trainer.step(), 3) for _ in range(4)])
