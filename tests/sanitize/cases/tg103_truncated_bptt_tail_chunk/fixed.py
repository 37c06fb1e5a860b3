# Near miss for TG103, modelled on the PyTorch forum thread "Implementing Truncated
# Backpropagation Through Time"
# (https://discuss.pytorch.org/t/implementing-truncated-backpropagation-through-time/15500): a
# character model steps its LSTM cell one character at a time, carries the state with grad, and
# backpropagates every K steps before detaching it. A sequence whose length is not a multiple of
# K leaves a short tail that is never backpropagated; the chain is used for training everywhere
# else, so this is not a rollout kept with grad for nothing. Must stay silent.
import torch
from torch import nn

K, SEQ, VOCAB = 16, 50, 12

torch.manual_seed(0)


class CharCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 24)
        self.cell = nn.LSTMCell(24, 32)
        self.out = nn.Linear(32, VOCAB)

    def forward(self, char, state):
        h, c = self.cell(self.embed(char), state)
        return self.out(h), (h, c)


model = CharCell()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
text = torch.randint(0, VOCAB, (6, 4, SEQ + 1))
for sequence in text:
    state = (torch.zeros(4, 32), torch.zeros(4, 32))
    loss = 0.0
    for t in range(SEQ):
        logits, state = model(sequence[:, t], state)
        loss = loss + nn.functional.cross_entropy(logits, sequence[:, t + 1])
        if (t + 1) % K == 0:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            state = tuple(s.detach() for s in state)
            loss = 0.0
print("trained on", len(text), "sequences")
