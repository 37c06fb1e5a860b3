# Modelled on hushell/sib_meta_learn#3 (https://github.com/hushell/sib_meta_learn/issues/3): the
# feature extractor runs inside a torch.no_grad() block, so training it end to end needs that
# block removed. Here a few-shot learner's embed() helper opens a no_grad block for a fixed
# normalisation only and calls the trainable embedding network after it, so the loss has a
# graph.
import torch
import torch.nn.functional as F
from torch import nn


class Learner:
    def __init__(self):
        self.net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def embed(self, x):
        with torch.no_grad():
            x = (x - x.mean(0, keepdim=True)) / (x.std(0, keepdim=True) + 1e-5)
        logits = self.net(x)
        return logits

    def train_step(self, x, y):
        logits = self.embed(x)
        loss = F.cross_entropy(logits, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(3)
learner = Learner()
x, y = torch.randn(12, 10), torch.randint(0, 4, (12,))
print(learner.train_step(x, y))
