# Fixed twin of buggy.py
# (https://deepinout.com/pytorch/pytorch-questions/75_pytorch_runtime_error_element_0_of_tensors_does_not_require_grad_and_does_not_have_a_grad_fn.html):
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
