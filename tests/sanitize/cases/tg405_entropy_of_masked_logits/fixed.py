# Fixed twin of buggy.py (https://github.com/huggingface/trl/issues/7221): log-probabilities are
# clamped to the dtype's lowest finite value before the product, as Categorical.entropy() does.
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
    return -(logp.exp() * logp.clamp(min=torch.finfo(logp.dtype).min)).sum(-1)


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
