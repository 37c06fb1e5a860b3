# Modelled on GitHub LZGMatrix/BOP19_CDPN_2019ICCV#4
# (https://github.com/LZGMatrix/BOP19_CDPN_2019ICCV/issues/4): coordinates are decoded from bin
# logits with torch.argmax before the loss, so backward dies with "element 0 of tensors does not
# require grad"; the loss must be taken before argmax (a softmax-weighted mean of the bin centres).
import torch
import torch.nn.functional as F
from torch import nn

BINS = 16


def decode(bin_logits: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """(N, BINS) logits -> (N,) coordinates."""
    weights = torch.softmax(bin_logits, dim=1)
    return weights @ centres


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor,
               target: torch.Tensor, centres: torch.Tensor) -> float:
    optimizer.zero_grad()
    pred = decode(model(x), centres)
    loss = F.l1_loss(pred, target.float())
    loss.backward()
    optimizer.step()
    return loss.item()


torch.manual_seed(2)
net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, BINS))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
bin_centres = torch.linspace(0.0, 1.0, BINS)
for _ in range(4):
    features = torch.randn(8, 8)
    train_step(net, opt, features, features[:, 0].sigmoid(), bin_centres)
