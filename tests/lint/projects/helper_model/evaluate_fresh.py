# Builds the model from the helper module's class, loads weights and evaluates: a fresh module is
# in train mode.
import torch

import models

net = models.Net()
net.load_state_dict(torch.load("weights.pt", weights_only=True))
test_loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,)))]
correct = 0  # expect: TG101
with torch.no_grad():
    for x, y in test_loader:
        correct += (net(x).argmax(1) == y).sum().item()
print(correct)
