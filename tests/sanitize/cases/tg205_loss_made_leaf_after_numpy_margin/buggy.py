# Report: https://github.com/ronghuaiyang/arcface-pytorch/issues/56
# Modelled on ronghuaiyang/arcface-pytorch#56: backward raised "element 0 of tensors does not
# require grad and does not have a grad_fn", so `loss.requires_grad = True` was added before it;
# the error went away, but "the loss is not decline, and the acc is always zero". Here the
# additive angular margin is applied in NumPy (the cosines taken out with .detach().numpy(), the
# margin logits brought back with torch.from_numpy), so the loss carries no graph; switching
# requires_grad on makes it a new leaf whose gradient reaches no parameter. The place is that line.
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class FaceEmbedder(nn.Module):
    def __init__(self, classes: int = 10, dim: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, dim))
        self.centers = nn.Parameter(torch.randn(classes, dim))

    def forward(self, x):
        return F.normalize(self.body(x)) @ F.normalize(self.centers).t()  # cosines (N, classes)


def arc_margin_loss(cosine, labels, s=16.0, m=0.3):
    cos = cosine.detach().numpy()
    theta = np.arccos(np.clip(cos, -1 + 1e-6, 1 - 1e-6))
    target = np.eye(cos.shape[1], dtype=bool)[labels.numpy()]
    logits = torch.from_numpy(s * np.where(target, np.cos(theta + m), cos)).float()
    loss = F.cross_entropy(logits, labels)
    loss.requires_grad = True  # expect: TG205
    return loss


torch.manual_seed(0)
model = FaceEmbedder()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    x, labels = torch.randn(32, 32), torch.randint(0, 10, (32,))
    loss = arc_margin_loss(model(x), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
