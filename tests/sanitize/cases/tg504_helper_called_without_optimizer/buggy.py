# Modelled on https://github.com/ktonal/mimikit/pull/30: a checkpoint helper saves the optimizer
# only when it is given one, and the training loop calls it without: every epoch checkpoint
# resumes with fresh Adam moments. The cause is the call, not the helper.
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def save_checkpoint(path, model, epoch, optimizer=None):
    state = {"model": model.state_dict(), "epoch": epoch}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    torch.save(state, path)


model = nn.GRU(4, 8, batch_first=True)
head = nn.Linear(8, 1)
params = [*model.parameters(), *head.parameters()]
opt = torch.optim.Adam(params, lr=1e-2)
folder = tempfile.mkdtemp()
for epoch in range(3):
    for _ in range(4):
        x = torch.randn(8, 5, 4)
        out, _ = model(x)
        loss = F.mse_loss(head(out[:, -1]), x[:, -1, :1])
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_checkpoint(os.path.join(folder, "last.pt"), model, epoch + 1)  # expect: TG504
