# Modelled on GitHub Quantum-Cheese/DeepReinforcementLearning_Pytorch#1
# (https://github.com/Quantum-Cheese/DeepReinforcementLearning_Pytorch/issues/1): an actor-critic
# worker stores each step's log-probability in its memory and, at update time, gathers them with
# torch.tensor([...]), which copies the values into a new tensor without a graph. The critic still
# learns from the value loss, so the loss falls and nothing fails, but the actor never gets a
# gradient. Here, a class-based worker on a toy bandit-like chain.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(4)


class ActorCritic(nn.Module):
    def __init__(self, n_obs: int = 6, n_actions: int = 3) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(n_obs, 16), nn.Tanh(), nn.Linear(16, n_actions))
        self.critic = nn.Sequential(nn.Linear(n_obs, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, obs):
        return torch.log_softmax(self.actor(obs), dim=-1), self.critic(obs).squeeze(-1)


class Worker:
    def __init__(self, gamma: float = 0.9) -> None:
        self.net = ActorCritic()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-2)
        self.gamma = gamma
        self.memory = []

    def act(self, obs):
        log_probs, value = self.net(obs)
        action = torch.multinomial(log_probs.exp(), 1).item()
        reward = 1.0 if action == int(obs.argmax()) % 3 else 0.0
        self.memory.append((value, log_probs[action], reward))

    def update(self):
        returns, g = [], 0.0
        for _, _, reward in reversed(self.memory):
            g = reward + self.gamma * g
            returns.insert(0, g)
        returns = torch.tensor(returns)
        values = torch.stack([m[0] for m in self.memory])
        log_probs = torch.tensor([m[1] for m in self.memory])  # expect: TG205
        advantage = returns - values.detach()
        actor_loss = -(log_probs * advantage).mean()
        critic_loss = F.mse_loss(values, returns)
        self.optimizer.zero_grad()
        (actor_loss + critic_loss).backward()
        self.optimizer.step()
        self.memory.clear()


worker = Worker()
for episode in range(8):
    for t in range(10):
        worker.act(torch.randn(6))
    worker.update()
print("updates done")
