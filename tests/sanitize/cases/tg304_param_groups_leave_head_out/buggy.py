# Modelled on zhunzhong07/HHL#8 (https://github.com/zhunzhong07/HHL/issues/8): the parameter
# groups are written by hand (a small learning rate for the backbone, the "new" parameters at the
# full rate), and the set of ids meant to pick out the new parameters also removes the embedding
# head, so no group holds it and it never trains. The groups list is where it belongs.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(4)


class ReidNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten())
        self.feat = nn.Linear(8, 6)
        self.classifier = nn.Linear(6, classes)

    def forward(self, x):
        return self.classifier(F.relu(self.feat(self.base(x))))


model = ReidNet()
base_ids = set(map(id, model.base.parameters())) | set(map(id, model.feat.parameters()))
new_params = [p for p in model.parameters() if id(p) not in base_ids]
param_groups = [
    {"params": model.base.parameters(), "lr_mult": 0.1},
    {"params": new_params, "lr_mult": 1.0},  # expect: TG304
]
optimizer = torch.optim.SGD(param_groups, lr=0.05, momentum=0.9)

images, ids = torch.randn(16, 3, 8, 8), torch.randint(0, 5, (16,))
for epoch in range(12):
    for i in range(0, 16, 4):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images[i:i + 4]), ids[i:i + 4])
        loss.backward()
        optimizer.step()
print(f"last loss {loss.item():.3f}")
