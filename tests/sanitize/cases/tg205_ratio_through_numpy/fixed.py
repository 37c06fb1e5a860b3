# Fixed twin of buggy.py (https://github.com/nikhilbarhate99/PPO-PyTorch/issues/18): the ratio is
# computed from the log-probabilities as tensors, so the actor's loss reaches the actor.
import torch
from torch import nn


class Agent(nn.Module):
    def __init__(self, obs=4, actions=2):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(obs, 32), nn.Tanh(), nn.Linear(32, actions))
        self.critic = nn.Sequential(nn.Linear(obs, 32), nn.Tanh(), nn.Linear(32, 1))

    def evaluate(self, states, actions):
        dist = torch.distributions.Categorical(logits=self.actor(states))
        return dist.log_prob(actions), self.critic(states).squeeze(-1)


class PPO:
    def __init__(self, agent, clip=0.2):
        self.agent, self.clip = agent, clip
        self.optimizer = torch.optim.Adam(agent.parameters(), lr=3e-3)

    def update(self, states, actions, old_logprobs, returns):
        for _ in range(4):
            logprobs, values = self.agent.evaluate(states, actions)
            ratios = torch.exp(logprobs - old_logprobs)
            advantages = returns - values.detach()
            surrogate = torch.min(ratios * advantages,
                                  ratios.clamp(1 - self.clip, 1 + self.clip) * advantages)
            loss = -surrogate.mean() + 0.5 * (values - returns).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


torch.manual_seed(0)
agent = Agent()
ppo = PPO(agent)
for episode in range(6):
    states = torch.randn(64, 4)
    with torch.no_grad():
        dist = torch.distributions.Categorical(logits=agent.actor(states))
        actions = dist.sample()
        old_logprobs = dist.log_prob(actions)
    returns = (actions == (states[:, 0] > 0).long()).float()
    ppo.update(states, actions, old_logprobs, returns)
print("done")
