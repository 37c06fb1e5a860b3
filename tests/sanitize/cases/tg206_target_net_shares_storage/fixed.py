# Modelled on "Updating target network - Potential Bug"
# (https://github.com/andri27-ts/Reinforcement-Learning/issues/14): after the online network's
# weights are put into the target network, the target network follows the online network on every
# update, so the TD targets are no longer held fixed. The fixed twin copies the values (`copy_`),
# so each target parameter keeps its own storage until the next hard update.
import copy

import torch
import torch.nn.functional as F
from torch import nn


class QNet(nn.Module):
    def __init__(self, n_obs: int, n_actions: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n_obs, 32)
        self.head = nn.Linear(32, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc(obs)))


def hard_update(target: nn.Module, online: nn.Module) -> None:
    for target_param, param in zip(target.parameters(), online.parameters()):
        target_param.data.copy_(param.data)


def main() -> None:
    torch.manual_seed(0)
    online = QNet(4, 2)
    target = copy.deepcopy(online)
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
    gamma = 0.99
    for step in range(12):
        obs, next_obs = torch.randn(16, 4), torch.randn(16, 4)
        actions, rewards = torch.randint(0, 2, (16,)), torch.randn(16)
        with torch.no_grad():
            td_target = rewards + gamma * target(next_obs).max(dim=1).values
        q = online(obs).gather(1, actions[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, td_target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 4 == 3:
            hard_update(target, online)


if __name__ == "__main__":
    main()
