# Near-miss: the helper's model has no mode-dependent layers, so its mode changes nothing.
import torch
import torch.nn.functional as F

from plain import make_plain

model = make_plain()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,)))]
for x, y in loader:
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
with torch.no_grad():
    for x, y in loader:
        print((model(x).argmax(1) == y).sum().item())
