# Modelled on GitHub wenet-e2e/wekws#73 (https://github.com/wenet-e2e/wekws/pull/73): the
# keyword-spotting executor's training loop calls backward() and optimizer.step() but never
# zero_grad(), so every step applies the sum of all earlier gradients.
import torch
from torch import nn


class KeywordNet(nn.Module):
    def __init__(self, feats: int = 10, hidden: int = 16, keywords: int = 3) -> None:
        super().__init__()
        self.gru = nn.GRU(feats, hidden, batch_first=True)
        self.head = nn.Linear(hidden, keywords)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(frames)
        return self.head(out[:, -1])


class Executor:
    def __init__(self, clip: float = 5.0) -> None:
        self.clip = clip
        self.step = 0

    def train(self, model, optimizer, batches, criterion):
        model.train()
        for feats, target in batches:
            logits = model(feats)  # expect: TG301
            loss = criterion(logits, target)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), self.clip)
            optimizer.step()
            self.step += 1


torch.manual_seed(1)
batches = [(torch.randn(8, 12, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
model = KeywordNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
executor = Executor()
for epoch in range(2):
    executor.train(model, optimizer, batches, nn.CrossEntropyLoss())
print("steps", executor.step)
