# Modelled on pytorch/pytorch#45053 "about benchmark issue"
# (https://github.com/pytorch/pytorch/issues/45053) and #6351 "cudnn benchmark=True overrides
# deterministic=True" (https://github.com/pytorch/pytorch/issues/6351): the script seeds torch and
# sets cudnn.deterministic = True, then also turns on cudnn.benchmark, so two trainings with the
# same seed end differently on a GPU. Fixed twin: benchmark stays off.
import torch
from torch import nn

SEED = 0
torch.manual_seed(SEED)
torch.backends.cudnn.benchmark = True  # expect: TG502
torch.backends.cudnn.deterministic = True
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
images = torch.randn(8, 1, 8, 8)
labels = torch.randint(0, 2, (8,))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    opt.step()
