# Fixed twin: the scoring method puts the model in eval mode before its no_grad block.
import torch
from torch import nn

torch.manual_seed(0)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.4), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)

    def score(self, rows):
        self.eval()
        with torch.no_grad():
            batch = torch.as_tensor(rows, dtype=torch.float32)
            return self(batch).squeeze(-1).tolist()


model = Regressor()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 5), torch.randn(64, 1)
model.train()
for _ in range(10):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
values = model.score(x[:4].tolist())
print([round(v, 3) for v in values])
