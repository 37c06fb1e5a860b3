# Report: https://github.com/wujiyang/Face_Pytorch/issues/10
# Modelled on wujiyang/Face_Pytorch#10 (the ArcFace margin head, whose weight is learned, was not
# given to the optimizer): an embedding network is trained with a margin loss module that holds
# the class centres and computes the cross-entropy inside its own call, and the optimizer is built
# over the embedding network only. The module takes the network's output and returns a loss, so it
# was excused as a "loss network"; its centres are on the loss's path and get gradients. The
# finding is where the optimizer was built. The fixed twin gives both to the optimizer.
import torch
import torch.nn.functional as F
from torch import nn


class MarginLoss(nn.Module):
    def __init__(self, dim: int, classes: int, scale: float = 16.0, margin: float = 0.2) -> None:
        super().__init__()
        self.centres = nn.Parameter(torch.randn(classes, dim))
        self.scale, self.margin = scale, margin

    def forward(self, embeddings: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        cosine = F.normalize(embeddings) @ F.normalize(self.centres).t()
        cosine = cosine - self.margin * F.one_hot(target, cosine.shape[1])
        return F.cross_entropy(self.scale * cosine, target)


torch.manual_seed(0)
embedder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8))
criterion = MarginLoss(8, 4)
optimizer = torch.optim.Adam([*embedder.parameters(), *criterion.parameters()], lr=1e-2)
x, y = torch.randn(256, 10), torch.randint(0, 4, (256,))
for epoch in range(3):
    for i in range(0, 256, 32):
        optimizer.zero_grad()
        loss = criterion(embedder(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
print(f"loss {loss.item():.3f}")
