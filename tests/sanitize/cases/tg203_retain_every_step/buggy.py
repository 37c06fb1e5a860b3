# Modelled on the habit discussed under the PyTorch docs' warning for retain_graph ("in nearly all
# cases setting this option to True is not needed",
# https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html) and the forum thread
# https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795:
# retain_graph=True on the only backward of each step keeps every step's activations alive until
# the next step replaces `loss`.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(16)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(4):
    x, y = torch.randn(16, 10), torch.randint(0, 2, (16,))
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)  # expect: TG203
    optimizer.step()
