# Fixed twin of buggy.py (https://tarepan.hatenablog.com/entry/2021/09/30/190134): the embeddings are
# given to the optimizer. A fixed projection in front of them is frozen with requires_grad_(False),
# and a teacher beside the model (its output a loss target, never the model's input) is left
# trainable: both stay silent.
import torch
from torch import nn

torch.manual_seed(11)
embedding = nn.Embedding(50, 8)
projection = nn.Linear(8, 8).requires_grad_(False)
model = nn.Sequential(nn.Flatten(), nn.Linear(5 * 8, 32), nn.ReLU(), nn.Linear(32, 2))
teacher = nn.Sequential(nn.Flatten(), nn.Linear(5 * 8, 2))
optimizer = torch.optim.Adam([*model.parameters(), *embedding.parameters()], lr=1e-2)
tokens, y = torch.randint(0, 50, (32, 5)), torch.randint(0, 2, (32,))
for step in range(40):
    optimizer.zero_grad()
    vectors = projection(embedding(tokens))
    logits = model(vectors)
    soft = teacher(vectors).softmax(1)
    loss = nn.functional.cross_entropy(logits, y) + nn.functional.mse_loss(logits.softmax(1), soft)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
