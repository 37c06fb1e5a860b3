# Near miss for TG502: a run that seeds nothing and sets no determinism flag turns on
# cudnn.benchmark for speed; it never asked to be reproducible. PyTorch's reproducibility notes
# (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking): "if you do
# not need reproducibility across multiple executions of your application, then performance might
# improve if the benchmarking feature is enabled".
import torch
from torch import nn

torch.backends.cudnn.benchmark = True
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
images = torch.randn(8, 1, 8, 8)
labels = torch.randint(0, 2, (8,))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    opt.step()
