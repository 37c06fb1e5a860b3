# Report: https://github.com/alexhernandezgarcia/gflownet/pull/133
# Modelled on alexhernandezgarcia/gflownet#133 ("Compute EMAs outside of pytorch": running
# averages of the loss kept as tensors chained every step's graph and memory grew fast) and on
# visionml/pytracking#313 (a trainer's _update_stats fed the loss tensor itself). Here a
# continuous-action policy returns a torch.distributions.Normal, so no module output is a tensor;
# the trainer keeps an exponential moving average per statistic, reading the old value into a
# name first. Feeding it the loss tensor links each step's graph to the next one.
import torch
from torch import nn

torch.manual_seed(0)


class GaussianPolicy(nn.Module):
    def __init__(self, obs_dim: int = 4, act_dim: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, act_dim))
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.body(obs), self.log_std.exp())


class Trainer:
    def __init__(self, policy: nn.Module, smoothing: float = 0.95) -> None:
        self.policy = policy
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
        self.smoothing = smoothing
        self.stats: dict[str, object] = {}

    def _update_stats(self, name: str, value) -> None:
        previous = self.stats.get(name)
        beta = self.smoothing
        smoothed = value if previous is None else beta * previous + (1 - beta) * value
        self.stats[name] = smoothed  # expect: TG201

    def update(self, obs: torch.Tensor) -> None:
        dist = self.policy(obs)
        actions = dist.sample()
        reward = -((actions - 0.5) ** 2).sum(-1)
        loss = -(dist.log_prob(actions).sum(-1) * (reward - reward.mean())).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self._update_stats("loss", loss)
        self._update_stats("reward", reward.mean().item())


trainer = Trainer(GaussianPolicy())
for it in range(12):
    trainer.update(torch.randn(64, 4))
print(f"reward {trainer.stats['reward']:.3f} loss {float(trainer.stats['loss']):.3f}")
