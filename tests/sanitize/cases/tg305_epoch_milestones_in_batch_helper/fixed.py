# Report: https://github.com/facebookresearch/detectron2/issues/2058
# A keyword-spotting classifier trained with functions: main() steps the MultiStepLR once per
# epoch, after train_one_epoch(), so its milestones (epochs 3 and 5 of 6) are epochs.
import torch
from torch import nn

torch.manual_seed(3)
feats = torch.randn(480, 20)
words = (feats[:, :4].sum(1) > 0).long() + (feats[:, 4] > 1).long()


def train_one_epoch(model, opt, batch=24):
    order = torch.randperm(len(feats))
    for start in range(0, len(order), batch):
        rows = order[start:start + batch]
        loss = nn.functional.cross_entropy(model(feats[rows]), words[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()


def main(epochs=6):
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 5], gamma=0.1)
    for _ in range(epochs):
        train_one_epoch(model, opt)
        sched.step()
    return opt.param_groups[0]["lr"]


print(main())
