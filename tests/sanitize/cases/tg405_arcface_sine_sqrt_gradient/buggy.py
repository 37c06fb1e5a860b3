# Modelled on the GitHub issue "Request to avoid loss to NaN"
# (https://github.com/ronghuaiyang/arcface-pytorch/issues/91): an additive-angular-margin head
# computes sin(theta) as sqrt(1 - cos^2). When an embedding lines up exactly with its class
# centre, cos is 1, the sqrt sees 0 and its derivative 1/(2*sqrt(x)) is infinite: the loss is
# finite, but the gradient, and after the step every weight, is NaN.
import math

import torch
import torch.nn.functional as F
from torch import nn


class MarginHead(nn.Module):
    def __init__(self, dim, classes, margin=0.3, scale=8.0):
        super().__init__()
        self.centres = nn.Parameter(torch.randn(classes, dim))
        self.cos_m, self.sin_m, self.scale = math.cos(margin), math.sin(margin), scale

    def forward(self, embedding, labels):
        cosine = F.linear(F.normalize(embedding), F.normalize(self.centres)).clamp(-1, 1)
        sine = torch.sqrt(1.0 - cosine * cosine)  # expect: TG405
        with_margin = cosine * self.cos_m - sine * self.sin_m
        one_hot = F.one_hot(labels, cosine.shape[1]).float()
        return self.scale * (one_hot * with_margin + (1 - one_hot) * cosine)


class Trainer:
    def __init__(self):
        torch.manual_seed(3)
        self.head = MarginHead(dim=4, classes=3)
        self.optimizer = torch.optim.SGD(self.head.parameters(), lr=0.05)

    def train_step(self, embedding, labels):
        logits = self.head(embedding, labels)
        loss = F.cross_entropy(logits, labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


trainer = Trainer()
for step in range(6):
    labels = torch.tensor([0, 1, 2, 0])
    embedding = torch.randn(4, 4)
    embedding[0] = trainer.head.centres.detach()[0] * 2.0  # a sample sitting on its centre
    last = trainer.train_step(embedding, labels)
print(f"loss {last}")
