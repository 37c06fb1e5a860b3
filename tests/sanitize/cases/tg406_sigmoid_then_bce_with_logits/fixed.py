# Fixed twin of buggy.py (https://github.com/lopuhin/kaggle-imet-2019/issues/3): logits to
# BCEWithLogitsLoss; a second model keeps its sigmoid and uses BCELoss, which expects probabilities.
import torch
from torch import nn

torch.manual_seed(8)
x = torch.randn(40, 8)
y = (torch.rand(40, 3) > 0.5).float()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.BCEWithLogitsLoss()
prob_model = nn.Sequential(nn.Linear(8, 3), nn.Sigmoid())
prob_opt = torch.optim.Adam(prob_model.parameters(), lr=1e-2)

for step in range(4):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()

    prob_opt.zero_grad()
    prob_loss = nn.functional.binary_cross_entropy(prob_model(x), y)
    prob_loss.backward()
    prob_opt.step()
print(f"loss {loss.item():.3f} {prob_loss.item():.3f}")
