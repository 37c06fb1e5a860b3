# Near miss for TG501: pytorch/examples' MNIST script
# (https://github.com/pytorch/examples/blob/main/mnist/main.py) seeds torch alone, then builds its
# data through a vision library. Here the library is imported after the seed, and its import pulls
# in modules whose top-level code draws from numpy's and Python's global generators (a table made
# with np.random.rand at import, an id counter started from random.getrandbits as in rich's
# style module, https://github.com/Textualize/rich/blob/master/rich/style.py). The script itself
# never draws from numpy or random: those import-time draws do not change its data order or its
# weights (PyTorch's notes, https://pytorch.org/docs/stable/notes/randomness.html), so the run
# stays silent.
import os
import sys

import torch
from torch import nn

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

torch.manual_seed(1)

from tg501_visionstub import datasets, transforms  # noqa: E402

train_set = datasets.synthetic_digits(128, torch.Generator().manual_seed(2))
loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.25),
                      nn.Linear(32, 10))
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
for epoch in range(2):
    for images, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(transforms.normalize(images, 0.5, 0.25)), labels)
        loss.backward()
        optimizer.step()
    print("epoch", epoch, "loss", loss.item())
