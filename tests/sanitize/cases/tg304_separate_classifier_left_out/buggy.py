# Modelled on the encoder + classifier pattern (z = encoder(img); pred = classifier(z)), where the
# optimizer must be built over both modules' parameters
# (https://r2d.info/2019/01/15/pytorch/, step 1: SGD(list(encoder.parameters()) +
# list(classifier.parameters()))). Here it is built over the encoder's alone: the separate
# classifier receives gradients every step but never changes, and the loss stalls.
import torch
from torch import nn

torch.manual_seed(3)
encoder = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
classifier = nn.Linear(16, 4)
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1, momentum=0.9)  # expect: TG304
x, y = torch.randn(64, 12), torch.randint(0, 4, (64,))
for step in range(40):
    optimizer.zero_grad()
    z = encoder(x)
    loss = nn.CrossEntropyLoss()(classifier(z.flatten(1)), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
