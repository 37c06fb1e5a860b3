# Modelled on "PyTorch: A Guide to add_param_group()" (new parameters the optimizer never sees)
# (https://runebook.dev/en/docs/pytorch/generated/torch.optim.adafactor/torch.optim.Adafactor.add_param_group): a pretrained
# backbone's classifier is replaced for the new number of classes after the optimizer was built,
# so the new head receives gradients every step but the optimizer never updates it.
import torch
from torch import nn

torch.manual_seed(19)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model[2] = nn.Linear(16, 3)  # new task: three classes  # expect: TG304
x, y = torch.randn(24, 8), torch.randint(0, 3, (24,))
for step in range(8):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
