# Modelled on an "Encoder - FixNet - Decoder" note (https://tarepan.hatenablog.com/entry/2021/09/30/190134):
# which modules train is decided by what the optimizer is given, not by backward. Here a separate
# embedding table before the model is meant to train, but the optimizer is built over the model
# only: the embeddings receive gradients every step and never change.
import torch
from torch import nn

torch.manual_seed(11)
embedding = nn.Embedding(50, 8)
model = nn.Sequential(nn.Flatten(), nn.Linear(5 * 8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)  # expect: TG304
tokens, y = torch.randint(0, 50, (32, 5)), torch.randint(0, 2, (32,))
for step in range(40):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(embedding(tokens)), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
