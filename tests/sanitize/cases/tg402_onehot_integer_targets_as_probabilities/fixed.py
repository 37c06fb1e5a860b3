# Modelled on GitHub George730/E-ResGAT#5 (https://github.com/George730/E-ResGAT/issues/5): an
# edge classifier trains on class indices, but its validation is handed the one-hot label matrix
# (int64, shaped like the logits). CrossEntropyLoss reads a target of the input's shape as class
# probabilities and fails with "Expected floating point type for target with class probabilities,
# got Long".
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
N, C = 64, 4
features = torch.randn(N, 10)
labels = torch.randint(0, C, (N,))
labels_onehot = F.one_hot(labels, C)

model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, C))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def predict(model, x, target):
    with torch.no_grad():
        out = model(x)
        return out, loss_fn(out, target).item()


for epoch in range(3):
    model.train()
    loss = loss_fn(model(features[:48]), labels[:48])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.eval()
    _, val_loss = predict(model, features[48:], labels[48:])
    print(epoch, val_loss)
