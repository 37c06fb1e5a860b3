# Fixed twin of buggy.py (https://jamesmccaffreyblog.com/2020/06/11/pytorch-crossentropyloss-vs-nllloss-cross-entropy-loss-vs-negative-log-likelihood-loss/):
# logits to CrossEntropyLoss, log_softmax to NLLLoss, softmax only for the predictions and for a
# distillation target.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(7)
x = torch.randn(64, 10)
y = torch.randint(0, 4, (64,))
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
criterion = nn.CrossEntropyLoss()

for step in range(3):
    optimizer.zero_grad()
    logits = model(x)
    loss = criterion(logits, y)
    loss.backward()
    optimizer.step()
    probs = logits.detach().softmax(dim=1)

head = nn.Linear(10, 4)
opt_head = torch.optim.SGD(head.parameters(), lr=0.5)
for step in range(3):
    opt_head.zero_grad()
    log_probs = F.log_softmax(head(x), dim=1)
    teacher = F.softmax(model(x).detach() / 2.0, dim=1)
    loss = F.nll_loss(log_probs, y) + F.cross_entropy(head(x), teacher)
    loss.backward()
    opt_head.step()
print(f"loss {loss.item():.3f} accuracy {(probs.argmax(1) == y).float().mean():.2f}")
