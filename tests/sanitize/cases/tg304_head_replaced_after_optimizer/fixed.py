# Fixed twin of buggy.py (https://runebook.dev/en/docs/pytorch/generated/torch.optim.adafactor/torch.optim.Adafactor.add_param_group):
# the optimizer is built after the head is replaced. A frozen backbone, and a GAN-like pair where each
# model has its own optimizer, stay silent.
import torch
from torch import nn

torch.manual_seed(19)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10))
model[2] = nn.Linear(16, 3)
for p in model[0].parameters():
    p.requires_grad_(False)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
critic = nn.Linear(3, 1)
critic_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
x, y = torch.randn(24, 8), torch.randint(0, 3, (24,))
for step in range(8):
    critic_opt.zero_grad()
    critic(model(x).detach()).mean().backward()
    critic_opt.step()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y) - 0.01 * critic(model(x)).mean()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
