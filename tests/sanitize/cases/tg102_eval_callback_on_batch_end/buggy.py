# Modelled on ThilinaRajapakse/simpletransformers#941
# (https://github.com/ThilinaRajapakse/simpletransformers/issues/941): evaluation during training
# runs from a hook every few steps; the hook puts the model in eval mode to score the dev set and
# hands control back without restoring training mode, so the remaining steps train with Dropout
# off and BatchNorm frozen. Reported at the hook's last line, after which training mode is
# restored (as the fixed twin does).
import torch
from torch import nn
import torch.nn.functional as F


class TextCNN(nn.Module):
    def __init__(self, vocab: int = 40, dim: int = 12, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.conv = nn.Conv1d(dim, 16, 3, padding=1)
        self.norm = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.25)
        self.head = nn.Linear(16, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm(self.conv(self.embed(tokens).transpose(1, 2))))
        return self.head(self.drop(h.amax(-1)))


class Callback:
    def on_batch_end(self, trainer: "Trainer") -> None:
        pass


class EvalDuringTraining(Callback):
    def __init__(self, dev: tuple, every: int) -> None:
        self.dev, self.every, self.scores = dev, every, []

    def on_batch_end(self, trainer: "Trainer") -> None:
        if trainer.global_step % self.every:
            return
        trainer.model.eval()
        tokens, labels = self.dev
        with torch.no_grad():
            self.scores.append((trainer.model(tokens).argmax(-1) == labels).float().mean().item())  # expect: TG102


class CallbackList:
    def __init__(self, callbacks: list) -> None:
        self.callbacks = callbacks

    def on_batch_end(self, trainer: "Trainer") -> None:
        for cb in self.callbacks:
            cb.on_batch_end(trainer)


class Trainer:
    def __init__(self, model: nn.Module, callbacks: list) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        self.callbacks = CallbackList(callbacks)
        self.global_step = 0

    def fit(self, batches: list, epochs: int) -> None:
        self.model.train()
        for _ in range(epochs):
            for tokens, labels in batches:
                loss = F.cross_entropy(self.model(tokens), labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.global_step += 1
                self.callbacks.on_batch_end(self)


torch.manual_seed(0)
batches = [(torch.randint(0, 40, (8, 10)), torch.randint(0, 3, (8,))) for _ in range(4)]
dev = (torch.randint(0, 40, (16, 10)), torch.randint(0, 3, (16,)))
Trainer(TextCNN(), [EvalDuringTraining(dev, every=3)]).fit(batches, epochs=2)
