# Report: https://github.com/tatsu-lab/alpaca_farm/issues/57
# Modelled on tatsu-lab/alpaca_farm#57: a PPO trainer accumulates the policy's gradient over
# micro-batches, but clears the policy's gradients at the top of every micro-batch
# (`self.policy.zero_grad()`), so each policy step learns from the last micro-batch only. The
# value network has its own optimizer and takes its step between the policy's micro-batches and
# the policy's step, so the backward just before the policy's step is the critic's.
import torch
from torch import nn


class PPOTrainer:
    def __init__(self, obs_dim: int = 8, actions: int = 4, micro: int = 4) -> None:
        self.policy = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, actions))
        self.critic = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 1))
        self.policy_opt = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.micro = micro

    def policy_loss(self, obs, act, adv, old_logp):
        logp = torch.log_softmax(self.policy(obs), -1).gather(1, act[:, None]).squeeze(1)
        ratio = (logp - old_logp).exp()
        return -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()

    def update(self, obs, act, adv, ret, old_logp):
        for chunk in zip(*(t.chunk(self.micro) for t in (obs, act, adv, old_logp))):
            self.policy.zero_grad()  # expect: TG302
            (self.policy_loss(*chunk) / self.micro).backward()
        self.critic_opt.zero_grad()
        value_loss = (self.critic(obs).squeeze(1) - ret).pow(2).mean()
        value_loss.backward()
        self.critic_opt.step()
        self.policy_opt.step()


torch.manual_seed(0)
trainer = PPOTrainer()
for update in range(4):
    obs = torch.randn(64, 8)
    act = torch.randint(0, 4, (64,))
    with torch.no_grad():
        old_logp = torch.log_softmax(trainer.policy(obs), -1).gather(1, act[:, None]).squeeze(1)
    adv, ret = torch.randn(64), torch.randn(64)
    trainer.update(obs, act, adv, ret, old_logp)
print("done")
