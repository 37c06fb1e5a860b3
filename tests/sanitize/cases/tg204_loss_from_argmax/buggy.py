# Modelled on the reports of "RuntimeError: element 0 of tensors does not require grad and does
# not have a grad_fn" collected in
# (https://deepinout.com/pytorch/pytorch-questions/75_pytorch_runtime_error_element_0_of_tensors_does_not_require_grad_and_does_not_have_a_grad_fn.html):
# the loss is computed from predicted classes (argmax), which carry no gradient.
import torch
from torch import nn

torch.manual_seed(7)
model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))

optimizer.zero_grad()
predicted = model(x).argmax(dim=1)  # expect: TG204
loss = (predicted != y).sum()
loss.backward()
optimizer.step()
