# Modelled on tk-rusch/coRNN#1 (https://github.com/tk-rusch/coRNN/issues/1): the test function
# calls model.eval() and training never calls model.train() again. Written as notebook cells: a
# helper that scores the model and keeps the best weights puts the model in eval mode and leaves
# it there, so every epoch after the first trains with Dropout off. The model.train() runs once,
# before the epoch loop: the top of that loop is where it belongs.
# %%
import copy

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
x_train, y_train = torch.randn(96, 6), torch.randint(0, 2, (96,))
x_val, y_val = torch.randn(32, 6), torch.randint(0, 2, (32,))

# %%
model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Dropout(0.3), nn.Linear(24, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
best = {"acc": -1.0, "state": None}


def select_best(net: nn.Module) -> float:
    net.eval()
    with torch.no_grad():
        acc = (net(x_val).argmax(1) == y_val).float().mean().item()
    if acc > best["acc"]:
        best.update(acc=acc, state=copy.deepcopy(net.state_dict()))
    return acc


# %%
model.train()
for epoch in range(3):  # expect: TG102
    for i in range(0, 96, 32):
        loss = F.cross_entropy(model(x_train[i:i + 32]), y_train[i:i + 32])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(epoch, select_best(model))

# %%
model.load_state_dict(best["state"])
print("best", best["acc"])
