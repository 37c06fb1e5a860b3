# Modelled on the GitHub issues "IndexError: Target 2 is out of bounds"
# (https://github.com/yangheng95/PyABSA/issues/375) and "Target -1 is out of bounds" ("the lowest
# valid label number is 0", https://github.com/EricFillion/happy-transformer/issues/248): labels run 1..3 while
# the classifier has 3 outputs, so the label 3 is out of range and the run dies.
import torch
from torch import nn

torch.manual_seed(12)
x = torch.randn(20, 5)
y = torch.randint(1, 4, (20,))  # expect: TG402 (labels 1, 2, 3 as stored in the CSV)
model = nn.Linear(5, 3)
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
