# Modelled on the forum thread "Trying to backward through the graph a second time with two
# losses" pattern discussed in
# https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795:
# two heads share an encoder, and each head's loss is backpropagated separately.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(6)
encoder = nn.Sequential(nn.Linear(5, 12), nn.Tanh())
head_a, head_b = nn.Linear(12, 2), nn.Linear(12, 1)
params = [*encoder.parameters(), *head_a.parameters(), *head_b.parameters()]
optimizer = torch.optim.Adam(params, lr=1e-3)
x, labels, values = torch.randn(10, 5), torch.randint(0, 2, (10,)), torch.randn(10, 1)

optimizer.zero_grad()
features = encoder(x)
loss_a = F.cross_entropy(head_a(features), labels)
loss_b = F.mse_loss(head_b(features), values)
loss_a.backward()
loss_b.backward()  # expect: TG202
optimizer.step()
