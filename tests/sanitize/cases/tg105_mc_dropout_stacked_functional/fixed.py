# Modelled on ageron/handson-ml2#70 (https://github.com/ageron/handson-ml2/issues/70): Monte
# Carlo dropout keeps dropout on after training, runs the model many times on the same input and
# reads the spread of its predictions. Here every hidden layer of a small classifier applies
# F.dropout(..., training=True) on purpose, so from the second layer on each dropout sees an input
# that changed with the first one's random mask; the model's own input is the same every pass.
import torch
import torch.nn.functional as F
from torch import nn


class BayesianMLP(nn.Module):
    def __init__(self, p=0.2):
        super().__init__()
        self.p = p
        self.fc1, self.fc2, self.out = nn.Linear(8, 32), nn.Linear(32, 32), nn.Linear(32, 3)

    def forward(self, h):
        h = F.dropout(F.relu(self.fc1(h)), self.p, training=True)  # on at prediction too
        h = F.dropout(F.relu(self.fc2(h)), self.p, training=True)
        return self.out(h)


torch.manual_seed(0)
model = BayesianMLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x_train, y_train = torch.randn(96, 8), torch.randint(0, 3, (96,))
for epoch in range(4):
    loss = F.cross_entropy(model(x_train), y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

model.eval()
x_query = torch.randn(10, 8)
with torch.no_grad():
    probs = [F.softmax(model(x_query), dim=1) for _ in range(25)]
mean = torch.stack(probs).mean(0)
entropy = -(mean * mean.clamp_min(1e-9).log()).sum(1)
print(f"mean predictive entropy {entropy.mean().item():.4f}")
