# Report: https://github.com/pytorch/pytorch/issues/26338
# A sequence tagger's predict() switches to eval mode and calls self.forward(x) directly (no
# module call, so no module hook runs); F.dropout in forward keeps its default training=True and
# still drops activations, so the same document gets different labels on each call.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Tagger(nn.Module):
    def __init__(self, n_features=12, hidden=32, n_labels=4):
        super().__init__()
        self.proj = nn.Linear(n_features, hidden)
        self.out = nn.Linear(hidden, n_labels)

    def forward(self, feats):
        h = F.dropout(torch.tanh(self.proj(feats)), p=0.3)  # expect: TG105
        return self.out(h)

    @torch.no_grad()
    def predict(self, feats):
        self.eval()
        return self.forward(feats).argmax(-1)


model = Tagger()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 20, 12), torch.randint(0, 4, (16, 20))
for step in range(5):
    model.train()
    loss = F.cross_entropy(model(x).reshape(-1, 4), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((model.predict(x[:2]) != model.predict(x[:2])).sum().item(), "labels changed")
