# Modelled on "PyTorch CrossEntropyLoss vs. NLLLoss" (logits for CrossEntropyLoss, log_softmax for
# NLLLoss) and "Using torch.nn.Softmax with torch.nn.NLLLoss" (https://runebook.dev/en/docs/pytorch/generated/torch.nn.softmax)
# (https://jamesmccaffreyblog.com/2020/06/11/pytorch-crossentropyloss-vs-nllloss-cross-entropy-loss-vs-negative-log-likelihood-loss/): the
# classifier ends in nn.Softmax and its output goes to CrossEntropyLoss; a second head feeds
# softmax probabilities to NLLLoss.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(7)
x = torch.randn(64, 10)
y = torch.randint(0, 4, (64,))
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4), nn.Softmax(dim=1))  # expect: TG401
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
criterion = nn.CrossEntropyLoss()

for step in range(3):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()

head = nn.Linear(10, 4)
opt_head = torch.optim.SGD(head.parameters(), lr=0.5)
for step in range(3):
    opt_head.zero_grad()
    loss = F.nll_loss(F.softmax(head(x), dim=1), y)  # expect: TG401
    loss.backward()
    opt_head.step()
print(f"loss {loss.item():.3f}")
