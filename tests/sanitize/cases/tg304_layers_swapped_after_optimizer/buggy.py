# Modelled on microsoft/nni#4521 (https://github.com/microsoft/nni/issues/4521), "The parameters
# are not updated when the pruned model is finetuned": a speed-up step replaces pruned layers with
# smaller ones after the optimizer was built, so the optimizer keeps stepping the old tensors and
# fine-tuning changes nothing (the maintainers: re-create the optimizer after the speed-up, as
# nni#3844 does in its example). The cause is the line that swapped the layers in.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(5)


class SmallCNN(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv = nn.Conv2d(1, width, 3, padding=1)
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        return self.head(F.relu(self.conv(x)).mean(dim=(2, 3)))


def keep_strongest(model, keep):
    """Replace conv and head with layers holding only the ``keep`` strongest channels."""
    idx = model.conv.weight.detach().abs().sum(dim=(1, 2, 3)).topk(keep).indices
    conv = nn.Conv2d(1, keep, 3, padding=1)
    head = nn.Linear(keep, 4)
    with torch.no_grad():
        conv.weight.copy_(model.conv.weight[idx])
        conv.bias.copy_(model.conv.bias[idx])
        head.weight.copy_(model.head.weight[:, idx])
        head.bias.copy_(model.head.bias)
    model.conv, model.head = conv, head


def train(model, optimizer, data, steps):
    model.train()
    for i in range(steps):
        x, y = data[i % len(data)]
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def prune_and_finetune(model, data):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, optimizer, data, 6)
    keep_strongest(model, keep=4)  # expect: TG304
    train(model, optimizer, data, 6)
    return model


data = [(torch.randn(8, 1, 6, 6), torch.randint(0, 4, (8,))) for _ in range(3)]
prune_and_finetune(SmallCNN(), data)
