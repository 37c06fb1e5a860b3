# Fixed twin of buggy.py (https://androidkt.com/pytorch-k-fold-cross-validation-using-dataloader-and-sklearn/):
# the optimizer is built with each fold's model. A frozen-feature teacher left with requires_grad
# (it gets gradients, no optimizer holds it) stays silent: the optimizer that steps has gradients.
import torch
from torch import nn

torch.manual_seed(5)
x, y = torch.randn(90, 6), torch.randint(0, 2, (90,))
folds = torch.arange(90).chunk(3)
teacher = nn.Linear(2, 2)
for k, val in enumerate(folds):
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train = torch.cat([f for j, f in enumerate(folds) if j != k])
    model.train()
    for epoch in range(4):
        for i in range(0, len(train), 10):
            batch = train[i:i + 10]
            optimizer.zero_grad(set_to_none=False)
            logits = model(x[batch])
            penalty = teacher(logits).pow(2).mean()
            loss = nn.functional.cross_entropy(logits, y[batch]) + 0.01 * penalty
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x[val]).argmax(1) == y[val]).float().mean().item()
    print(f"fold {k}: accuracy {accuracy:.2f}")
