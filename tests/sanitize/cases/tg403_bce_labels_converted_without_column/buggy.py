# Modelled on the GitHub issue "ValueError: Using a target size (torch.Size([46])) that is
# different to the input size (torch.Size([46, 1]))" (https://github.com/Arctanxy/W-Net-PyTorch/issues/15):
# labels converted to float for a binary loss keep their (N,) shape while the one-logit head gives
# (N, 1), and the loss raises. The conversion is the line that prepares the target for the loss,
# so the missing column belongs there; the finding is placed on it, the loss line in its message.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_step(scorer, optimizer, features, churn_flags):
    churned = churn_flags.to(torch.float32)  # expect: TG403
    logits = scorer(features)
    loss = nn.functional.binary_cross_entropy_with_logits(logits, churned)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


torch.manual_seed(11)
customers = TensorDataset(torch.randn(48, 7), torch.randint(0, 2, (48,)))
scorer = nn.Sequential(nn.Linear(7, 12), nn.ReLU(), nn.Linear(12, 1))
optimizer = torch.optim.Adam(scorer.parameters(), lr=1e-2)
for features, churn_flags in DataLoader(customers, batch_size=12, shuffle=True):
    train_step(scorer, optimizer, features, churn_flags)
