# Modelled on GitHub idlrl/flare#7 (https://github.com/idlrl/flare/issues/7): prediction code
# must wrap its forward in no_grad, and the discussion is where that wrapping belongs. Here the
# model's own classify() method switches to eval mode and calls self(...) with grad enabled, so
# every call builds a graph nobody backpropagates; no_grad belongs inside that method.
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
        logits = self(data)  # expect: TG103
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
