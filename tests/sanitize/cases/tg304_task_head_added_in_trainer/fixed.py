# Modelled on microsoft/nni#4521 (https://github.com/microsoft/nni/issues/4521), parameters made
# after the optimizer that is then reused, and LaurentMazare/ocaml-torch#36
# (https://github.com/LaurentMazare/ocaml-torch/issues/36), a layer created after its optimizer
# whose loss never moves. A continual-learning trainer keeps one optimizer in self.optimizer and,
# for each new task, a helper module function adds a classification head to the model's
# ModuleDict. The new heads get gradients but are never stepped. The line to change is the
# trainer's call of the helper, where self.optimizer is reachable.
# Fixed twin: the trainer gives the new head's parameters to its optimizer.
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadNet(nn.Module):
    def __init__(self, dim=10, hidden=24):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.heads = nn.ModuleDict({"task0": nn.Linear(hidden, 2)})

    def forward(self, x, task):
        return self.heads[task](self.trunk(x))


def attach_head(model, task, classes):
    hidden = model.trunk[0].out_features
    model.heads[task] = nn.Linear(hidden, classes)
    return model.heads[task]


class ContinualTrainer:
    def __init__(self):
        self.model = MultiHeadNet()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def new_task(self, task, classes):
        head = attach_head(self.model, task, classes)
        self.optimizer.add_param_group({"params": head.parameters()})
        return head

    def fit(self, task, x, y, steps=4):
        for _ in range(steps):
            loss = F.cross_entropy(self.model(x, task), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = ContinualTrainer()
    x = torch.randn(32, 10)
    print(trainer.fit("task0", x, (x[:, 0] > 0).long()))
    trainer.new_task("task1", 3)
    print(trainer.fit("task1", x, torch.randint(0, 3, (32,))))
