# Modelled on GitHub blackfeather-wang/InfoPro-Pytorch#1
# (https://github.com/blackfeather-wang/InfoPro-Pytorch/issues/1): in locally supervised training
# each early stage backpropagates its own auxiliary loss inside forward() and hands a detached
# tensor to the next stage; an optimizer hook that zeroes the gradients after the forward wipes
# those local gradients before the step, so the early stages never change. Here, a two-stage
# MLP on random tabular data driven by a small hook runner.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class TwoStageNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.aux1 = nn.Linear(32, 3)
        self.stage2 = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.stage1(x)
        F.cross_entropy(self.aux1(h), y).backward()  # the first stage's local loss
        return F.cross_entropy(self.stage2(h.detach()), y)


class OptimizerHook:
    def before_iter(self, runner: "Runner") -> None:
        pass

    def after_iter(self, runner: "Runner") -> None:
        runner.optimizer.zero_grad()  # expect: TG302
        runner.loss.backward()
        runner.optimizer.step()


class Runner:
    def __init__(self, model: nn.Module, hooks: list) -> None:
        self.model, self.hooks = model, hooks
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def run(self, batches: list) -> None:
        for x, y in batches:
            for hook in self.hooks:
                hook.before_iter(self)
            self.loss = self.model(x, y)
            for hook in self.hooks:
                hook.after_iter(self)


data = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(6)]
Runner(TwoStageNet(), [OptimizerHook()]).run(data)
