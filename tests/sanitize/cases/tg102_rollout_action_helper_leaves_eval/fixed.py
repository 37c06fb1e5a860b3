# Modelled on UoA-CARES/cares_reinforcement_learning#23
# (https://github.com/UoA-CARES/cares_reinforcement_learning/pull/23): an actor-critic agent's
# action selection puts the actor in eval mode for the environment step and returns without
# restoring it; the policy update that follows trains the actor with BatchNorm frozen. Reported
# where select_action() returns, the call from the rollout loop named in the message.
import torch
from torch import nn


class Actor(nn.Module):
    def __init__(self, obs: int = 4, act: int = 2) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Linear(32, act), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Agent:
    def __init__(self) -> None:
        self.actor = Actor()
        self.critic = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3)

    def select_action(self, state: torch.Tensor) -> torch.Tensor:
        self.actor.eval()
        with torch.no_grad():
            action = self.actor(state.unsqueeze(0))[0]
        self.actor.train()
        return action.clamp(-1, 1)

    def update_policy(self, states: torch.Tensor) -> float:
        q = self.critic(torch.cat([states, self.actor(states)], dim=1))
        loss = -q.mean()
        self.actor_opt.zero_grad()
        loss.backward()
        self.actor_opt.step()
        return loss.item()


torch.manual_seed(0)
agent = Agent()
memory = []
state = torch.randn(4)
for t in range(12):
    action = agent.select_action(state)
    memory.append(state)
    state = torch.randn(4) + 0.1 * action.sum()
    if len(memory) >= 8:
        agent.update_policy(torch.stack(memory[-8:]))
