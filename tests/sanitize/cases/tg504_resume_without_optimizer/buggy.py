# Modelled on the GitHub issues "Optimizer state is not saved"
# (https://github.com/CSAILVision/places365/issues/78) and "Question: restoring optimizer state
# during checkpoint resuming" (https://github.com/NVlabs/stylegan2-ada-pytorch/issues/108): the
# epoch checkpoint holds the model and the epoch, but not Adam's state, so a resumed run restarts
# Adam's moment estimates and its loss jumps.
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
                "loss": loss.item()}, os.path.join(folder, "last.pt"))  # expect: TG504
