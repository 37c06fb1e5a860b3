# Modelled on Lightning-AI/pytorch-lightning#10287 (https://github.com/Lightning-AI/pytorch-lightning/issues/10287):
# a physics-informed network takes du/dx with torch.autograd.grad inside its forward, so its
# validation step, run under torch.no_grad(), switches grad back on with a bare
# torch.set_grad_enabled(True) statement. The switch stays on after the forward that needed it:
# the validation losses the loop keeps carry graphs no backward uses. Fixed twin: grad is turned
# on only around that forward, with torch.enable_grad().
import torch
import torch.nn as nn
import torch.nn.functional as F


class PINN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        x = x.requires_grad_(True)
        u = self.body(x)
        dudx = torch.autograd.grad(u.sum(), x, create_graph=self.training)[0]
        return u, dudx


class Task(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = PINN()

    def training_step(self, x):
        u, dudx = self.net(x.clone())
        return F.mse_loss(dudx, torch.cos(x)) + F.mse_loss(u[:1], torch.zeros(1, 1))

    def validation_step(self, x):
        torch.set_grad_enabled(True)  # expect: TG104
        u, dudx = self.net(x.clone())
        return F.mse_loss(dudx, torch.cos(x)) + F.mse_loss(u, torch.sin(x))


task = Task()
optimizer = torch.optim.Adam(task.parameters(), lr=1e-3)
for epoch in range(2):
    task.train()
    torch.set_grad_enabled(True)
    loss = task.training_step(torch.rand(32, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    task.eval()
    with torch.no_grad():
        losses = [task.validation_step(torch.rand(16, 1)) for _ in range(3)]
    print(f"epoch {epoch}: val {torch.stack(losses).mean().item():.4f}")
