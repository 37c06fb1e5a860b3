# Fixed twin: classify() runs its forward under no_grad.
import torch
from torch import nn

torch.manual_seed(1)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 3))

    def forward(self, x):
        return self.net(x)

    def classify(self, data):
        self.eval()
        with torch.no_grad():
            logits = self(data)
        return logits.argmax(1)


tagger = Tagger()
opt = torch.optim.Adam(tagger.parameters(), lr=1e-2)
feats, labels = torch.randn(48, 6), torch.randint(0, 3, (48,))
for _ in range(5):
    tagger.train()
    opt.zero_grad()
    nn.functional.cross_entropy(tagger(feats), labels).backward()
    opt.step()
print((tagger.classify(feats) == labels).float().mean().item())
