# Modelled on GitHub asyml/texar-pytorch#311 (https://github.com/asyml/texar-pytorch/pull/311):
# the examples' evaluation during training left the model in eval mode, and the training steps
# after the first evaluation ran with it. Here the evaluation helper switches both networks to
# eval mode through a mode-setter module and returns without switching back: the helper's
# return is where training mode must be restored.
import torch
from torch import nn

import modes

torch.manual_seed(6)
encoder = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.ReLU())
head = nn.Linear(8, 2)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
data = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(4)]


def evaluate(batches):
    modes.switch([encoder, head], False)
    hits = 0
    with torch.no_grad():
        for xb, yb in batches:
            hits += (head(encoder(xb)).argmax(1) == yb).sum().item()
    return hits  # expect: TG102


modes.switch([encoder, head], True)
for epoch in range(2):
    for step, (xb, yb) in enumerate(data):
        opt.zero_grad()
        nn.functional.cross_entropy(head(encoder(xb)), yb).backward()
        opt.step()
        if step == 1:
            print("hits", evaluate(data[:2]))
