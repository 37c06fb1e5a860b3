# Report: https://github.com/thu-ml/tianshou/issues/40
# Modelled on thu-ml/tianshou#40 ("Missing sum over log_prob in SAC": the target Q gets the
# action's width because log_prob is not summed over dimension 1). Here a value learner in a
# trainer class scores a 3-dimensional Gaussian policy; the entropy bonus is built from the
# per-dimension log-density and added to the (N, 1) reward, so the smooth-L1 target is (N, 3).
# The bonus line is what to change (sum over the action dimension), not the loss.
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal


class ValueLearner:
    def __init__(self, obs_dim: int = 4, act_dim: int = 3, temperature: float = 0.1) -> None:
        self.value = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 1))
        self.mean = nn.Linear(obs_dim, act_dim)
        self.opt = torch.optim.Adam(self.value.parameters(), lr=1e-3)
        self.temperature = temperature

    def _sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        policy = Normal(self.mean(obs), torch.ones(1))
        action = policy.sample()
        return action, policy.log_prob(action)

    def update(self, obs: torch.Tensor, reward: torch.Tensor) -> float:
        with torch.no_grad():
            _, log_density = self._sample(obs)
            bonus = -self.temperature * log_density  # expect: TG403
            target = reward + bonus
        loss = F.smooth_l1_loss(self.value(obs), target)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


torch.manual_seed(8)
learner = ValueLearner()
for step in range(4):
    obs = torch.randn(32, 4)
    learner.update(obs, reward=obs[:, :1].abs())
