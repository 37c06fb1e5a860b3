# Report: https://github.com/huggingface/trl/issues/7221
# A policy over a masked action space sets invalid actions' logits to -inf; the entropy bonus is
# computed by hand as -(p * log p), and an action with probability exactly 0 gives 0 * -inf =
# NaN, the step writes NaN into the weights and the next sampling fails, so no later backward
# runs. The entropy's product in the helper is the line.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
VALID = torch.tensor([True, True, True, False, False, True])


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 6))

    def forward(self, obs):
        return self.body(obs).masked_fill(~VALID, float("-inf"))


def entropy(logits):
    logp = F.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)  # expect: TG405


policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
def update(step):
    obs = torch.randn(32, 4)
    logits = policy(obs)
    actions = torch.distributions.Categorical(logits=logits).sample()
    advantages = torch.randn(32)
    logp = F.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
    loss = -(logp * advantages).mean() - 0.01 * entropy(logits).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


try:
    losses = [update(step) for step in range(20)]
except ValueError as err:  # Categorical rejects the NaN logits once the weights are NaN
    print("sampling failed:", str(err)[:60])
