# The look-alike of buggy.py: the mask is made on the device of the tokens it is compared with,
# so moving the model and its inputs to the accelerator keeps one device.
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab: int = 30, dim: int = 16, tags: int = 5, device: str = "cpu") -> None:
        super().__init__()
        self.device = torch.device(device)
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(tokens))
        steps = torch.arange(tokens.shape[1], device=tokens.device)
        keep = steps[None, :] < lengths[:, None]
        return self.out(hidden) * keep[..., None]


torch.manual_seed(1)
model = Tagger()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    tokens, lengths = torch.randint(0, 30, (4, 12)), torch.randint(3, 13, (4,))
    tags = torch.randint(0, 5, (4, 12))
    loss = nn.functional.cross_entropy(model(tokens, lengths).flatten(0, 1), tags.flatten())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
accel = torch.device("meta")
model.to(accel)
scores = model(torch.randint(0, 30, (2, 12)).to(accel), torch.tensor([12, 7]).to(accel))
print(tuple(scores.shape))
