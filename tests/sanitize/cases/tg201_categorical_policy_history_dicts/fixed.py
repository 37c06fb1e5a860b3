# Report: https://github.com/TRI-ML/packnet-sfm/pull/51
# Modelled on TRI-ML/packnet-sfm#51 ("Detach loss before appending it to the training output
# list") in a REINFORCE script: the policy returns a torch.distributions.Categorical, and each
# episode's record keeps loss.item() in a dict appended to a history list: no graph outlives its
# episode.
import torch
from torch import nn

torch.manual_seed(0)

policy = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 3))


class Bandit(nn.Module):
    """A tiny wrapper module whose forward returns the action distribution."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor) -> torch.distributions.Categorical:
        return torch.distributions.Categorical(logits=self.net(obs))


agent = Bandit(policy)
optimizer = torch.optim.SGD(agent.parameters(), lr=0.05)
history = []
for episode in range(10):
    obs = torch.randn(32, 6)
    dist = agent(obs)
    actions = dist.sample()
    reward = (actions == obs[:, :3].argmax(1)).float()
    loss = -(dist.log_prob(actions) * (reward - reward.mean())).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append({"episode": episode, "loss": loss.item(), "reward": reward.mean().item()})
print("mean reward", sum(h["reward"] for h in history) / len(history))
