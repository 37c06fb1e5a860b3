# Modelled on sicara/easy-few-shot-learning#18
# (https://github.com/sicara/easy-few-shot-learning/issues/18): a prototypical network's
# support-set method puts its own backbone in eval mode, and each episode's training then runs
# the backbone with BatchNorm frozen. A module does not switch its own mode: the eval() inside
# the model's method is the line to change.
import torch
from torch import nn
import torch.nn.functional as F


class ProtoNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                      nn.Linear(16, 8))
        self.prototypes = torch.zeros(0)

    def process_support_set(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        feats = self.backbone(images)
        self.prototypes = torch.stack([feats[labels == k].mean(0) for k in range(3)])

    def forward(self, queries: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(self.backbone(queries), self.prototypes)


torch.manual_seed(0)
model = ProtoNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model.train()
for episode in range(6):
    support, s_labels = torch.randn(9, 12), torch.arange(3).repeat(3)
    queries, q_labels = torch.randn(6, 12), torch.arange(3).repeat(2)
    optimizer.zero_grad()
    model.process_support_set(support, s_labels)
    loss = F.cross_entropy(model(queries), q_labels)
    loss.backward()
    optimizer.step()
