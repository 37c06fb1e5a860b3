# Modelled on huggingface/transformers#45656
# (https://github.com/huggingface/transformers/issues/45656): an engine wrapper's backward()
# steps the optimizer itself when the engine owns the step, and the training loop steps it for
# every other setup. Here the loop's own step is behind a test that is false whenever the engine
# does not own the step either, so no update ever runs. The loop's step is the line to change,
# not the engine's.
import torch
from torch import nn

from engine import Engine

torch.manual_seed(6)
engine = Engine(owns_step=False)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = engine.wrap(torch.optim.SGD(model.parameters(), lr=0.1))
x, y = torch.randn(128, 10), torch.randint(0, 2, (128,))


def train(epochs):
    for epoch in range(epochs):
        for i in range(0, 128, 16):
            loss = nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16])
            engine.backward(loss)
            if engine.owns_step:  # meant: not engine.owns_step  # expect: TG303
                optimizer.step()
                optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")


train(3)
