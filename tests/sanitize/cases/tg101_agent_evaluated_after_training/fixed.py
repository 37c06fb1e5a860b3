# Fixed twin of buggy.py (https://github.com/facebookresearch/habitat-lab/issues/83): the
# evaluation puts the policy in eval mode. Near-miss that must stay silent: the rollouts between
# updates run in training mode under no_grad, and training follows each of them.
import torch
import torch.nn.functional as F
from torch import nn


class Corridor:
    """Walk left (0) or right (1) towards a goal; the observation is (position, goal, gap)."""

    def __init__(self, n: int = 4) -> None:
        self.n = n

    def reset(self) -> torch.Tensor:
        self.pos, self.goal, self.t = torch.zeros(self.n), torch.rand(self.n) * 2 - 1, 0
        return self.observe()

    def observe(self) -> torch.Tensor:
        return torch.stack([self.pos, self.goal, self.goal - self.pos], 1)

    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
        self.pos = self.pos + 0.1 * (2 * action.float() - 1)
        self.t += 1
        return self.observe(), -(self.goal - self.pos).abs(), self.t >= 10


def update(policy, optimizer, obs, target) -> None:
    loss = F.cross_entropy(policy(obs), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def evaluate(policy, env, episodes=3) -> float:
    policy.eval()
    total = 0.0
    for _ in range(episodes):
        obs, done = env.reset(), False
        while not done:
            with torch.no_grad():
                action = policy(obs).argmax(1)
            obs, reward, done = env.step(action)
            total += reward.mean().item()
    return total / episodes


torch.manual_seed(0)
env = Corridor()
policy = nn.Sequential(nn.Linear(3, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2),
                       nn.Linear(16, 2))
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
policy.train()
for iteration in range(5):
    obs, done, seen = env.reset(), False, []
    while not done:  # a rollout between updates, in training mode: not an evaluation
        with torch.no_grad():
            action = policy(obs).argmax(1)
        seen.append(obs)
        obs, _, done = env.step(action)
    batch = torch.cat(seen)
    update(policy, optimizer, batch, (batch[:, 2] > 0).long())
print(f"mean return {evaluate(policy, env):.3f}")
