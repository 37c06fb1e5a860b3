# Fixed twin of pytorch/pytorch#45053 (https://github.com/pytorch/pytorch/issues/45053): a
# reproducible run keeps cudnn.benchmark off, as PyTorch's reproducibility notes say
# (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking).
import torch
from torch import nn

SEED = 0
torch.manual_seed(SEED)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
images = torch.randn(8, 1, 8, 8)
labels = torch.randint(0, 2, (8,))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    opt.step()
