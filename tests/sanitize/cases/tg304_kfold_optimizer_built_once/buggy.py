# Modelled on the k-fold loop of "PyTorch K-Fold Cross-Validation using Dataloader and Sklearn"
# (https://androidkt.com/pytorch-k-fold-cross-validation-using-dataloader-and-sklearn/), with the
# optimizer built once, before the fold loop: every fold builds a fresh model, but the optimizer
# still holds fold 0's parameters, so from fold 1 on the model receives gradients and never changes
# while the optimizer steps parameters that no longer get any.
import torch
from torch import nn

torch.manual_seed(5)
x, y = torch.randn(90, 6), torch.randint(0, 2, (90,))
folds = torch.arange(90).chunk(3)
optimizer = None
for k, val in enumerate(folds):
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    if optimizer is None:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TG304
    train = torch.cat([f for j, f in enumerate(folds) if j != k])
    model.train()
    for epoch in range(4):
        for i in range(0, len(train), 10):
            batch = train[i:i + 10]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x[val]).argmax(1) == y[val]).float().mean().item()
    print(f"fold {k}: accuracy {accuracy:.2f}")
