# Near-miss of buggy.py (https://github.com/oxwhirl/pymarl/pull/73): a REINFORCE-style learner
# whose recurrent policy carries its hidden state through the episode with grad on, on purpose:
# the episode's log-probabilities are summed into a loss and backpropagated, so the chained graph
# is used. Must stay silent.
import torch
from torch import nn

torch.manual_seed(3)


class RecurrentPolicy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(5, 16)
        self.rnn = nn.GRUCell(16, 16)
        self.logits = nn.Linear(16, 3)

    def forward(self, obs, hidden):
        hidden = self.rnn(torch.relu(self.inp(obs)), hidden)
        return self.logits(hidden), hidden


policy = RecurrentPolicy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
for episode in range(3):
    hidden = torch.zeros(4, 16)
    state = torch.randn(4, 5)
    log_probs, rewards = [], []
    for t in range(20):
        logits, hidden = policy(state, hidden)
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        rewards.append(-(action.float() - 1.0).abs())
        state = torch.randn(4, 5)
    returns = torch.stack(rewards).flip(0).cumsum(0).flip(0)
    loss = -(torch.stack(log_probs) * returns).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
