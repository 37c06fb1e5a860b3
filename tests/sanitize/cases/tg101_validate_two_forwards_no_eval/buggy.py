# Report: https://github.com/ashafahi/free_adv_train/issues/4
# Adversarial training's validate() scores clean and perturbed inputs with two forwards under
# no_grad, right after the training epoch left the model in training mode: BatchNorm normalises
# with each test batch's own statistics and moves its running statistics toward them. The
# missing model.eval() belongs before the loop of validate(), one place for both forwards.
import torch
from torch import nn

torch.manual_seed(0)


def train_epoch(model, optimizer, batches):
    model.train()
    for x, y in batches:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def validate(model, batches, eps=0.1):
    clean, perturbed = 0, 0  # expect: TG101
    for x, y in batches:
        with torch.no_grad():
            clean += int((model(x).argmax(1) == y).sum())
            noisy = x + eps * torch.randn_like(x).sign()
            perturbed += int((model(noisy).argmax(1) == y).sum())
    return clean, perturbed


model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]
for epoch in range(2):
    train_epoch(model, optimizer, batches)
    print(epoch, validate(model, batches))
