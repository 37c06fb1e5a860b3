# Near miss for TG306, modelled on the PyTorch forum thread "Updating part of an embedding matrix
# (only for out of vocab words)"
# (https://discuss.pytorch.org/t/updating-part-of-an-embedding-matrix-only-for-out-of-vocab-words/33297):
# only the rows of out-of-vocabulary words train, so the pretrained rows' gradients are zeroed
# after the scaled backward and before scaler.step unscales them. Zeroing is the same on scaled
# and unscaled gradients, unlike a clip, so the order is correct.
import torch
from torch import nn

VOCAB, DIM, PRETRAINED = 50, 16, 40

torch.manual_seed(0)
embedding = nn.Embedding(VOCAB, DIM)
classifier = nn.Linear(DIM, 3)
trainable_rows = torch.zeros(VOCAB, 1)
trainable_rows[PRETRAINED:] = 1.0
params = list(embedding.parameters()) + list(classifier.parameters())
optimizer = torch.optim.Adam(params, lr=1e-2)
scaler = torch.amp.GradScaler("cpu")
tokens = torch.randint(0, VOCAB, (128, 12))
labels = tokens[:, 0] % 3
before = embedding.weight[:PRETRAINED].detach().clone()
for step in range(30):
    batch = torch.randint(0, 128, (16,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = classifier(embedding(tokens[batch]).mean(1))
    loss = nn.functional.cross_entropy(logits.float(), labels[batch])
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    embedding.weight.grad.mul_(trainable_rows)
    scaler.step(optimizer)
    scaler.update()
assert torch.equal(before, embedding.weight[:PRETRAINED].detach())
print(f"loss {loss.item():.4f}")
