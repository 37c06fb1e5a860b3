# Modelled on GitHub pfnet/pytorch-pfn-extras#688
# (https://github.com/pfnet/pytorch-pfn-extras/issues/688): the validation's begin hook put the
# model in eval mode and nothing restored it afterwards; training mode was set only at the start
# of an epoch, so with a validation run mid-epoch the steps after it trained in eval mode. Here
# the validation routine calls a mode setter of the same file and returns without switching
# back: its return is where training mode must be restored.
import torch
from torch import nn

torch.manual_seed(3)
models = {"main": nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                nn.Dropout(0.2), nn.Linear(16, 3))}
opt = torch.optim.Adam(models["main"].parameters(), lr=1e-2)
batches = [(torch.randn(16, 6), torch.randint(0, 3, (16,))) for _ in range(6)]


def validation_begin(target):
    for m in target.values():
        m.eval()


def run_validation(target, loader):
    validation_begin(target)
    total = 0.0
    with torch.no_grad():
        for xb, yb in loader:
            total += nn.functional.cross_entropy(target["main"](xb), yb).item()
    return total / len(loader)  # expect: TG102


for epoch in range(2):
    models["main"].train()
    for it, (xb, yb) in enumerate(batches):
        opt.zero_grad()
        nn.functional.cross_entropy(models["main"](xb), yb).backward()
        opt.step()
        if it == 2:  # validation at a fraction of an epoch
            print("val loss", run_validation(models, batches[:2]))
