"""TG102's message names the optimizer step the eval mode reaches: an agent whose ``act()`` puts
the policy in eval mode for acting, and whose update steps the value network first, then the
policy (PaddlePaddle/PARL#927 added ``agent.train()``/``agent.eval()`` because acting and learning
need different modes). The step to name is the policy optimizer's, not the first one."""

from __future__ import annotations

from trainguard.lint import lint_text

SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F


class Agent:
    def __init__(self):
        self.policy = nn.Sequential(nn.Linear(6, 64), nn.LayerNorm(64), nn.ReLU(),
                                    nn.Dropout(0.1), nn.Linear(64, 2))
        self.value = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
        self.policy_opt = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.value_opt = torch.optim.Adam(self.value.parameters(), lr=1e-3)

    def act(self, obs):
        self.policy.eval()
        with torch.no_grad():
            return torch.tanh(self.policy(obs))

    def learn(self, obs, action, ret):
        value_loss = F.mse_loss(self.value(torch.cat([obs, action], 1)), ret)
        self.value_opt.zero_grad()
        value_loss.backward()
        self.value_opt.step()
        policy_loss = -self.value(torch.cat([obs, torch.tanh(self.policy(obs))], 1)).mean()
        self.policy_opt.zero_grad()
        policy_loss.backward()
        self.policy_opt.step()


agent = Agent()
obs = torch.randn(16, 6)
for it in range(100):
    action = agent.act(obs)
    ret = torch.randn(16, 1)
    agent.learn(obs, action, ret)
    obs = torch.randn(16, 6)
'''


def test_the_message_names_the_step_of_the_optimizer_that_holds_the_module():
    found = [f for f in lint_text(SCRIPT) if f.code == "TG102"]
    assert len(found) == 1, found
    lines = SCRIPT.splitlines()
    policy_step = 1 + lines.index("        self.policy_opt.step()")
    value_step = 1 + lines.index("        self.value_opt.step()")
    assert f"optimizer step (line {policy_step})" in found[0].message, found[0].message
    assert f"line {value_step}" not in found[0].message
