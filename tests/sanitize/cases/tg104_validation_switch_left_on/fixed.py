# Fixed twin of buggy.py (https://github.com/Lightning-AI/pytorch-lightning/issues/10287): grad
# is turned on only around the forward that takes du/dx; the validation loss carries no graph.
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
        with torch.enable_grad():
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
