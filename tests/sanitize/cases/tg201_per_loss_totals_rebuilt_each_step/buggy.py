# Report: https://github.com/MultimediaTechLab/YOLO/pull/83
# Modelled on MultimediaTechLab/YOLO#83 (a memory leak fixed by summing each named loss with
# .item()): a detector-style trainer keeps one running total per loss name for the epoch's log.
# Here the totals dict is rebuilt at every step from its old entries plus the step's loss
# tensors, so each entry chains every step's graph until the epoch ends. The fix is at the
# rebuild: add val.item() (or val.detach()), not the tensor.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Trainer:
    def __init__(self, net: nn.Module) -> None:
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.05)
        self.totals: dict = {}

    def losses(self, x: torch.Tensor, y: torch.Tensor, box: torch.Tensor) -> dict:
        out = self.net(x)
        cls = F.cross_entropy(out[:, :3], y)
        reg = F.smooth_l1_loss(out[:, 3:], box)
        return {"cls": cls, "box": reg, "total": cls + 2.0 * reg}

    def accumulate(self, parts: dict) -> None:
        self.totals = {name: self.totals.get(name, 0.0) + val  # expect: TG201
                       for name, val in parts.items()}

    def epoch(self, batches: list) -> dict:
        self.net.train()
        self.totals, seen = {}, 0
        for x, y, box in batches:
            parts = self.losses(x, y, box)
            self.opt.zero_grad()
            parts["total"].backward()
            self.opt.step()
            self.accumulate(parts)
            seen += 1
        return {name: float(total) / seen for name, total in self.totals.items()}


data = [(torch.randn(16, 8), torch.randint(0, 3, (16,)), torch.randn(16, 4)) for _ in range(8)]
trainer = Trainer(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 7)))
for epoch in range(2):
    print(epoch, {name: round(v, 3) for name, v in trainer.epoch(data).items()})
