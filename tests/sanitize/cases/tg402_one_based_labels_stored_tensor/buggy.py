# Modelled on GitHub pytorch/pytorch#15666 ("Why does Cuda NLLCriterion mandate consecutive labels
# starting at 0?", https://github.com/pytorch/pytorch/issues/15666): a CIFAR-10 variant whose
# labels are numbered 1..10 instead of 0..9, fed to a 10-way classifier trained with
# cross-entropy, which dies on the label 10. The labels are read once into one tensor and sliced
# per mini-batch; the line to change is where that tensor is made, not the loss line.
import torch
from torch import nn

torch.manual_seed(7)


def read_cifar_variant(count):
    images = torch.rand(count, 3, 8, 8)
    return images, torch.arange(count) % 10 + 1  # expect: TG402


train_images, train_labels = read_cifar_variant(120)
net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)


def fit(epochs, batch_size=30):
    for _ in range(epochs):
        order = torch.randperm(len(train_images))
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            loss = nn.functional.cross_entropy(net(train_images[batch]), train_labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


print(f"loss {fit(2):.3f}")
