# Fixed twin of buggy.py, modelled on sicara/easy-few-shot-learning#40
# (https://github.com/sicara/easy-few-shot-learning/issues/40): only the frozen backbone runs
# under torch.no_grad(); the trainable adapter runs after the block, so the loss has a graph
# through it although the backbone and the head are frozen. Must stay silent.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
adapter = nn.Linear(32, 32)  # the only trained parameters
head = nn.Linear(32, 5)
for module in (backbone, head):
    module.requires_grad_(False)
optimizer = torch.optim.SGD(adapter.parameters(), lr=0.05)


def fine_tune_step(x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        feats = backbone(x)
    feats = adapter(feats)
    loss = F.cross_entropy(head(feats), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


for _ in range(3):
    fine_tune_step(torch.randn(10, 12), torch.randint(0, 5, (10,)))
