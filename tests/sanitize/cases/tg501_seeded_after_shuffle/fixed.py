# Fixed twin of diningphil/PyDGN#31 (https://github.com/diningphil/PyDGN/issues/31): every
# generator is seeded before the first draw, so the split is the same on every run.
import random

import torch
from torch import nn

SEED = 0
torch.manual_seed(SEED)
random.seed(SEED)
files = [f"sample_{i:03d}" for i in range(40)]
random.shuffle(files)
val_files, train_files = files[:8], files[8:]


def setup_training(seed):
    random.seed(seed)  # reseeding an already seeded generator is fine
    model = nn.Linear(4, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


model, opt = setup_training(SEED)
x = torch.randn(len(train_files), 4)
y = torch.randint(0, 2, (len(train_files),))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print(len(val_files), "validation files")
