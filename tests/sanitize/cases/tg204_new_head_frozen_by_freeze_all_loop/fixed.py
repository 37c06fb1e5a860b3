# Modelled on GitHub cfzd/Ultra-Fast-Lane-Detection#282
# (https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/282): a fine-tuning setup froze every
# parameter of the model, the part meant to train included, and the first backward died with
# "element 0 of tensors does not require grad"; freezing only the backbone fixed it. Here a
# trainer attaches a fresh intent classifier to a pretrained sentence encoder, then its freeze
# loop walks the whole model, so the classifier it just attached is frozen too. The loop is the
# line to change; the backward where the error surfaces is named in the message.
import torch
from torch import nn

torch.manual_seed(2)
VOCAB, DIM, INTENTS = 50, 16, 4


class SentenceEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, DIM)
        self.classifier = nn.Linear(DIM, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.tanh(self.embed(tokens)))


class IntentTrainer:
    def __init__(self, encoder: SentenceEncoder) -> None:
        self.model = encoder
        self.model.classifier = nn.Linear(DIM, INTENTS)
        for name, weight in self.model.embed.named_parameters():
            weight.requires_grad_(False)
        self.opt = torch.optim.AdamW(self.model.classifier.parameters(), lr=1e-2)

    def step(self, tokens: torch.Tensor, intents: torch.Tensor) -> float:
        loss = nn.functional.cross_entropy(self.model(tokens), intents)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


trainer = IntentTrainer(SentenceEncoder())
tokens, intents = torch.randint(0, VOCAB, (12, 7)), torch.randint(0, INTENTS, (12,))
print([round(trainer.step(tokens, intents), 3) for _ in range(3)])
