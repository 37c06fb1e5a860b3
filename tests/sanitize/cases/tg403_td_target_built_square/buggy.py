# Report: https://github.com/Jona240/DDPG-Routing-Test/issues/1
# Modelled on Jona240/DDPG-Routing-Test#1 (the critic never fits). The replay buffer gives rewards
# of shape (B,), the target critic values of shape (B, 1): their sum is already (B, B), so the
# loss itself sees a target with as many elements as the broadcast and PyTorch's "different
# size" warning is the only trace. The critic learns the mean target.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
B, OBS, ACT = 32, 5, 2
critic = nn.Sequential(nn.Linear(OBS + ACT, 32), nn.ReLU(), nn.Linear(32, 1))
target_critic = nn.Sequential(nn.Linear(OBS + ACT, 32), nn.ReLU(), nn.Linear(32, 1))
target_critic.load_state_dict(critic.state_dict())
optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
gamma = 0.99


def sample():
    s, a = torch.randn(B, OBS), torch.randn(B, ACT)
    return s, a, torch.randn(B), torch.randn(B, OBS), torch.randn(B, ACT)


for update in range(5):
    s, a, r, s2, a2 = sample()
    with torch.no_grad():
        y = r + gamma * target_critic(torch.cat([s2, a2], 1))
    q = critic(torch.cat([s, a], 1))
    loss = F.mse_loss(q, y)  # expect: TG403
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("critic loss", round(loss.item(), 4))
