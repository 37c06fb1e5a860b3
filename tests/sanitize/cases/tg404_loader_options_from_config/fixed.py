# Report: https://github.com/erdongsanshi/Fuss-Free-structure/issues/1
# Modelled on erdongsanshi/Fuss-Free-structure#1 ("Expected more than 1 value per channel when
# training, got input size torch.Size([1, 16, 1, 1])"): 1201 training images in batches of 4
# leave a last batch of one, which a globally pooled BatchNorm2d cannot normalise. Here the
# loader's options are a nested entry of the run's settings, unpacked into the DataLoader, so
# `drop_last=True` belongs in that entry. 41 samples in batches of 4 leave one.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SETTINGS = {
    "data": {
        "loader": {"batch_size": 4, "shuffle": True, "drop_last": True},
        "size": 41,
    },
    "lr": 0.01,
}


class CountHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 16, 1), nn.BatchNorm2d(16))
        self.out = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        return self.out(torch.relu(self.pool(self.features(x)))).flatten(1)


def make_loader(settings):
    n = settings["data"]["size"]
    ds = TensorDataset(torch.randn(n, 3, 12, 12), torch.rand(n, 1) * 10)
    return DataLoader(ds, **settings["data"]["loader"])


torch.manual_seed(0)
model = CountHead()
opt = torch.optim.SGD(model.parameters(), lr=SETTINGS["lr"])
loader = make_loader(SETTINGS)
for epoch in range(2):
    model.train()
    for images, counts in loader:
        loss = nn.functional.mse_loss(model(images), counts)
        opt.zero_grad()
        loss.backward()
        opt.step()
