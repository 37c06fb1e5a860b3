# Modelled on GitHub vinhkhuc/PyTorch-Mini-Tutorials#1
# (https://github.com/vinhkhuc/PyTorch-Mini-Tutorials/issues/1): a classifier assembled with
# add_module ends in a Softmax module and its output goes to CrossEntropyLoss, which applies its
# own log_softmax. Here the training steps run under a TorchFunctionMode that counts the ops of
# each step (a profiling aid), so every torch call passes through the mode's handler first.
import collections

import torch
from torch.overrides import TorchFunctionMode

torch.manual_seed(11)


class OpCounter(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.counts[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


def build(features, classes):
    model = torch.nn.Sequential()
    model.add_module("hidden", torch.nn.Linear(features, 24))
    model.add_module("act", torch.nn.Tanh())
    model.add_module("scores", torch.nn.Linear(24, classes))
    model.add_module("softmax", torch.nn.Softmax(dim=1))  # expect: TG401
    return model


points = torch.randn(96, 6)
labels = (points[:, 0] > 0).long() + (points[:, 1] > 0).long()
net = build(6, 3)
optimizer = torch.optim.SGD(net.parameters(), lr=0.3)
criterion = torch.nn.CrossEntropyLoss()
counter = OpCounter()
for epoch in range(4):
    with counter:
        optimizer.zero_grad()
        loss = criterion(net(points), labels)
        loss.backward()
        optimizer.step()
print(f"loss {loss.item():.3f}, {sum(counter.counts.values())} torch calls")
