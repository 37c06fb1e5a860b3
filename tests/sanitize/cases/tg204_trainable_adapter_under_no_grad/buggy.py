# Modelled on sicara/easy-few-shot-learning#40
# (https://github.com/sicara/easy-few-shot-learning/issues/40), "Finetune: does not require grad
# and does not have a grad_fn": fine-tuning a few-shot classifier on a frozen backbone, the
# query features go through the small trainable part inside the same torch.no_grad() block as the
# frozen backbone, and the frozen scoring head after it builds no graph, so backward dies. The
# frozen head is not the line to change: the trainable adapter's call inside the no_grad block
# is. Fixed twin: only the backbone runs under no_grad.
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
        feats = adapter(feats)  # expect: TG204
    loss = F.cross_entropy(head(feats), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


for _ in range(3):
    fine_tune_step(torch.randn(10, 12), torch.randint(0, 5, (10,)))
