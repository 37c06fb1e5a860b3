# Modelled on the save_checkpoint() helper of the PyTorch ImageNet example
# (https://github.com/pytorch/examples/blob/main/imagenet/main.py) as copied into many projects,
# and on "Optimizer state is not saved" (https://github.com/CSAILVision/places365/issues/78): the
# helper only writes what it is handed, and the call that builds the dict leaves the optimizer
# out. The place to fix is the caller's dict, not the helper's torch.save.
import os
import shutil
import tempfile

import torch
from torch import nn


def save_checkpoint(state, is_best, filename):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, filename.replace("checkpoint", "model_best"))


torch.manual_seed(24)
x, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
folder = tempfile.mkdtemp()
best = float("inf")
for epoch in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    is_best, best = loss.item() < best, min(best, loss.item())
    save_checkpoint({"epoch": epoch + 1, "state_dict": model.state_dict(),
                     "best_loss": best}, is_best, os.path.join(folder, "checkpoint.pth.tar"))  # expect: TG504
