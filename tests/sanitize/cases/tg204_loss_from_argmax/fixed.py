# Fixed twin of buggy.py
# (https://discuss.pytorch.org/t/runtimeerror-element-0-of-variables-does-not-require-grad-and-does-not-have-a-grad-fn/11074):
# the loss is computed from the logits; the error rate is only reported.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(7)
model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))

optimizer.zero_grad()
logits = model(x)
loss = F.cross_entropy(logits, y)
loss.backward()
optimizer.step()
errors = (logits.argmax(dim=1) != y).sum().item()
