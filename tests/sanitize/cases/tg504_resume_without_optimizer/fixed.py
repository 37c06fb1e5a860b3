# Fixed twin of buggy.py (https://github.com/CSAILVision/places365/issues/78), in the shape of the
# recipe "Saving and loading a general checkpoint"
# (https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html):
# the resume checkpoint holds the optimizer state; the final export of model.state_dict() alone is
# for inference and stays silent.
import os
import tempfile

import torch
from torch import nn

torch.manual_seed(16)
x, y = torch.randn(32, 4), torch.randn(32, 1)
model = nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
folder = tempfile.mkdtemp()
for epoch in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    torch.save({"epoch": epoch, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "loss": loss.item()},
               os.path.join(folder, "last.pt"))
torch.save(model.state_dict(), os.path.join(folder, "model_for_inference.pt"))
torch.save({"model": model.state_dict(), "val_loss": loss.item()}, os.path.join(folder, "best.pt"))
