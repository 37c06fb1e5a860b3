# Report: https://github.com/jina-ai/finetuner/issues/435
# Modelled on jina-ai/finetuner#435 (freezing a backbone for fine-tuning left nothing trainable,
# and the first backward raised "element 0 of tensors does not require grad"). Here a small
# keyword-spotting network is frozen as a whole, then a second pass over its named parameters,
# meant to unfreeze the output block, calls requires_grad_(False) again: that call changes
# nothing, the optimizer gets only frozen parameters, and backward fails. The fix is True there.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(6)
net = nn.Sequential(nn.Conv1d(1, 4, 5), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                    nn.Linear(4, 3))
for weight in net.parameters():
    weight.requires_grad_(False)
for label, weight in net.named_parameters():
    if label.startswith("4."):
        weight.requires_grad_(True)
opt = torch.optim.SGD([w for label, w in net.named_parameters() if label.startswith("4.")], lr=0.1)

for _ in range(3):
    clips, words = torch.randn(8, 1, 40), torch.randint(0, 3, (8,))
    loss = F.cross_entropy(net(clips), words)
    opt.zero_grad()
    loss.backward()
    opt.step()
