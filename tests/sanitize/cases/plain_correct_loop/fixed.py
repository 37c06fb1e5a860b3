# A plain, correct hand-written training loop that must yield nothing: train/eval switching,
# no_grad evaluation, zero_grad every step, .item() for logging, and a resumable checkpoint with the
# optimizer state, loaded back with weights_only=True. Its shape follows the PyTorch tutorial
# "Saving and loading a general checkpoint"
# (https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html).
import os
import tempfile

import torch
from torch import nn

torch.manual_seed(4)
x_train, y_train = torch.randn(64, 8), torch.randint(0, 4, (64,))
x_val, y_val = torch.randn(32, 8), torch.randint(0, 4, (32,))
model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                      nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
criterion = nn.CrossEntropyLoss()
history = []

for epoch in range(3):
    model.train()
    epoch_loss = 0.0
    for start in range(0, 64, 16):
        xb, yb = x_train[start:start + 16], y_train[start:start + 16]
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    model.eval()
    with torch.no_grad():
        val_logits = model(x_val)
        val_loss = criterion(val_logits, y_val).item()
        val_acc = (val_logits.argmax(1) == y_val).float().mean().item()
    history.append((epoch_loss / 4, val_loss, val_acc))

with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "checkpoint.pt")
    torch.save({"epoch": 3, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "history": history}, path)
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
print(history[-1])
