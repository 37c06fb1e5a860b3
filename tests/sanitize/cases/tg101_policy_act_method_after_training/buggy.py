# Modelled on GitHub DLR-RM/stable-baselines3#537 ("Training and evaluation: call model.train()
# and model.eval()", https://github.com/DLR-RM/stable-baselines3/pull/537): a policy's own act()
# method runs the network under no_grad but never switches it to eval mode, so evaluation
# episodes after training draw Dropout masks and batch statistics. eval() belongs in act(), the
# method every caller goes through.
import torch
import torch.nn.functional as F
from torch import nn


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                  nn.Dropout(0.2), nn.Linear(16, 2))

    def forward(self, obs):
        return self.body(obs)

    def act(self, obs):
        with torch.no_grad():  # expect: TG101
            return self(obs).argmax(1)


def episode(policy, steps=8) -> float:
    pos, goal, total = torch.zeros(4), torch.rand(4) * 2 - 1, 0.0
    for _ in range(steps):
        action = policy.act(torch.stack([pos, goal, goal - pos], 1))
        pos = pos + 0.1 * (2 * action.float() - 1)
        total += -(goal - pos).abs().mean().item()
    return total


torch.manual_seed(1)
policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(20):
    obs = torch.randn(32, 3)
    loss = F.cross_entropy(policy(obs), (obs[:, 2] > 0).long())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(sum(episode(policy) for _ in range(3)) / 3)
