# Fine-tuning with one optimizer per parameter group, the backbone frozen for a warm-up by not
# stepping its optimizer (per-parameter optimization, https://pytorch.org/docs/stable/optim.html#per-parameter-options;
# discussed in https://discuss.pytorch.org/t/how-to-freeze-and-unfreeze-layers/35405): the backbone
# optimizer is zeroed every step but steps only from epoch 2 on. It steps: TG303 stays silent.
import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
head = nn.Linear(16, 3)
opt_head = torch.optim.Adam(head.parameters(), lr=1e-3)
opt_backbone = torch.optim.Adam(backbone.parameters(), lr=1e-4)
x = torch.randn(64, 8)
y = torch.randint(0, 3, (64,))
WARMUP = 2
for epoch in range(4):
    for i in range(0, 64, 16):
        opt_head.zero_grad()
        opt_backbone.zero_grad()
        loss = nn.functional.cross_entropy(head(backbone(x[i:i + 16])), y[i:i + 16])
        loss.backward()
        opt_head.step()
        if epoch >= WARMUP:
            opt_backbone.step()
