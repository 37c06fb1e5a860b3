# A gradient-sensitivity probe before training (connection sensitivity |g * w| as in SNIP, Lee et
# al. 2019, https://arxiv.org/abs/1810.02340), clearing gradients with the training optimizer's
# zero_grad (https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html), then
# ordinary training with that optimizer. It steps: TG303 stays silent.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 8)
y = torch.randint(0, 3, (64,))
sensitivity = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
for i in range(0, 64, 16):
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16]).backward()
    for name, p in model.named_parameters():
        sensitivity[name] += (p.grad * p).abs()
for epoch in range(2):
    for i in range(0, 64, 16):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16]).backward()
        optimizer.step()
