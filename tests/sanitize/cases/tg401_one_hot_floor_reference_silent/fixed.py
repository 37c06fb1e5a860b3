# Near-miss, must stay silent. Modelled on the Stack Overflow question "Cross Entropy in PyTorch"
# (https://stackoverflow.com/questions/49390842/cross-entropy-in-pytorch): CrossEntropyLoss on a
# one-hot row [0, 0, 0, 1] gives 0.7437, not 0, because it applies softmax to its input. Here the
# script trains on logits (correct) and uses exactly that value on purpose: a one-hot batch built
# from the labels gives the floor that a double-softmax model could never go below, and the
# training loss is checked against it. The one-hot rows are a reference, not a model's output.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)
num_classes = 4
feats = torch.randn(96, 10)
labels = (feats[:, :num_classes]).argmax(1)

model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, num_classes))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
criterion = nn.CrossEntropyLoss()


def double_softmax_floor(targets: torch.Tensor, classes: int) -> float:
    perfect = F.one_hot(targets, classes).to(torch.float32)
    with torch.no_grad():
        return criterion(perfect, targets).item()


for epoch in range(40):
    opt.zero_grad()
    loss = criterion(model(feats), labels)
    loss.backward()
    opt.step()

floor = double_softmax_floor(labels, num_classes)
print(f"loss {loss.item():.3f}; a softmax-fed loss would stop at {floor:.3f}")
if loss.item() < floor:
    print("the model is fed logits")
