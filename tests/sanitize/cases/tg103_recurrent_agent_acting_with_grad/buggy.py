# Modelled on GitHub oxwhirl/pymarl#73 (https://github.com/oxwhirl/pymarl/pull/73): an episode
# runner picks actions with a recurrent agent network while grad is on; the hidden state handed
# from one environment step to the next chains every step into one graph that no backward uses,
# so memory grows with the length of the episode.
import torch
from torch import nn

torch.manual_seed(3)


class RecurrentAgent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(5, 16)
        self.rnn = nn.GRUCell(16, 16)
        self.q = nn.Linear(16, 3)

    def forward(self, obs, hidden):
        hidden = self.rnn(torch.relu(self.inp(obs)), hidden)
        return self.q(hidden), hidden


agent = RecurrentAgent()
opt = torch.optim.RMSprop(agent.parameters(), lr=1e-3)
replay = []
for episode in range(3):
    hidden = torch.zeros(4, 16)
    state = torch.randn(4, 5)
    for t in range(20):
        q, hidden = agent(state, hidden)  # expect: TG103
        actions = q.argmax(-1)
        replay.append((state, actions))
        state = torch.randn(4, 5) + actions.unsqueeze(-1).float() * 0.1
    # a learner update on replayed transitions, with a fresh hidden state
    h = torch.zeros(4, 16)
    loss = 0.0
    for s, a in replay[-20:]:
        q, h = agent(s, h)
        loss = loss + q.gather(1, a.unsqueeze(1)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
