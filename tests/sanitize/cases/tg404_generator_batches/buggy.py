# Modelled on dapengchen123/video_reid#4 (https://github.com/dapengchen123/video_reid/issues/4):
# "Expected more than 1 value per channel when training" at the classifier's BatchNorm1d "when
# we finish 1 epoch", the sampler leaving too few samples for the last iteration. Here a
# generator of the script hands out the pairs' batches itself (no DataLoader, so no drop_last):
# 21 pairs in steps of 4 leave a last batch of one.
import torch
from torch import nn


def pair_batches(features, labels, batch_size):
    order = torch.randperm(len(features))
    for first in range(0, len(features), batch_size):  # expect: TG404
        picked = order[first:first + batch_size]
        yield features[picked], labels[picked]


class PairClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(12, 16)
        self.classifier_bn = nn.BatchNorm1d(16)
        self.out = nn.Linear(16, 2)

    def forward(self, diff):
        return self.out(torch.relu(self.classifier_bn(self.embed(diff))))


torch.manual_seed(0)
features, labels = torch.randn(21, 12), torch.randint(0, 2, (21,))
model = PairClassifier()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(2):
    for diff, target in pair_batches(features, labels, batch_size=4):
        loss = nn.functional.cross_entropy(model(diff), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
