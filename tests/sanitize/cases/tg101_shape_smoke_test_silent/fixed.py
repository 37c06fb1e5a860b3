# Near miss for TG101: a freshly built language model (in training mode, its Dropout active) is
# run once as a shape smoke test before training: only the output's shape is compared, and a
# shape does not depend on the mode. Pattern from a tutorial's model check that prints
# `out.logits.shape` right after building the model
# (https://github.com/datawhalechina/happy-llm/issues/99).
import torch
from torch import nn

torch.manual_seed(0)
VOCAB, WIDTH = 20, 16


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        return self.head(self.drop(self.embed(tokens)))


def check_shapes(model, batch=2, seq=5):
    tokens = torch.randint(0, VOCAB, (batch, seq))
    logits = model(tokens)
    assert logits.shape == (batch, seq, VOCAB), logits.shape
    assert logits.size(-1) == VOCAB
    print(f"output shape {tuple(logits.shape)}")


model = TinyLM()
check_shapes(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    tokens = torch.randint(0, VOCAB, (4, 6))
    logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
