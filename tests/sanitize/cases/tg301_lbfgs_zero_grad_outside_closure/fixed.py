# Modelled on GitHub Lightning-AI/pytorch-lightning#6147
# (https://github.com/Lightning-AI/pytorch-lightning/pull/6147): the automatic-optimization loop
# zeroed the gradients once per batch, outside the closure it handed to optimizer.step(); LBFGS
# evaluates that closure up to max_iter times per step, so each evaluation's backward added onto
# the previous one's gradients and the line search followed their running sum.
import torch
from torch import nn


class CurveFit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch):
        t, u = batch
        return nn.functional.mse_loss(self.net(t), u)


class AutoOptLoop:
    def __init__(self, module, optimizer) -> None:
        self.module, self.optimizer = module, optimizer

    def training_step_and_backward(self, batch):
        self.optimizer.zero_grad()
        loss = self.module.training_step(batch)
        loss.backward()
        return loss

    def run_batch(self, batch):
        return self.optimizer.step(closure=lambda: self.training_step_and_backward(batch))


torch.manual_seed(0)
t = torch.linspace(-2, 2, 64).unsqueeze(1)
batch = (t, torch.sin(2 * t))
module = CurveFit()
loop = AutoOptLoop(module, torch.optim.LBFGS(module.parameters(), lr=0.5, max_iter=10))
for epoch in range(3):
    loss = loop.run_batch(batch)
print(f"loss {loss.item():.4f}")
