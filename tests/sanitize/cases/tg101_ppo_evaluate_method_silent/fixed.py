# Near miss for TG101: PPO's actor-critic has an `evaluate(state, action)` method
# (nikhilbarhate99/PPO-PyTorch, https://github.com/nikhilbarhate99/PPO-PyTorch); the old state
# values are taken with it under no_grad before the update epochs. Its return values feed the
# policy update, not a metric, even though the method is named `evaluate`.
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)


class ActorCritic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2), nn.Softmax(-1))
        self.critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Dropout(0.1), nn.Linear(32, 1))

    def evaluate(self, state, action):
        dist = Categorical(self.actor(state))
        values = self.critic(state)
        return dist.log_prob(action), values, dist.entropy()


policy = ActorCritic()
opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
for iteration in range(2):
    states = torch.randn(32, 4)
    with torch.no_grad():
        actions = Categorical(policy.actor(states)).sample()
    old_logp = torch.zeros(32)
    rewards = (actions == 1).float()
    with torch.no_grad():
        _, old_values, _ = policy.evaluate(states, actions)
    advantage = rewards - old_values.squeeze(-1)
    for epoch in range(3):
        logp, values, entropy = policy.evaluate(states, actions)
        ratio = (logp - old_logp).exp()
        loss = (-torch.min(ratio * advantage, ratio.clamp(0.8, 1.2) * advantage).mean()
                + 0.5 * ((values.squeeze(-1) - rewards) ** 2).mean() - 0.01 * entropy.mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done")
