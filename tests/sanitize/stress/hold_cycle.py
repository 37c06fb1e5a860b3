"""A loss whose graph is held only through an autograd reference cycle: a custom Function keeps
its output on ``ctx`` instead of ``ctx.save_for_backward``, so output -> grad_fn (ctx) -> output,
freed only when the garbage collector runs (the memory leak the save_for_backward docs warn of,
https://pytorch.org/docs/stable/generated/torch.autograd.function.FunctionCtx.save_for_backward.html).
No variable of the script holds the old graphs; the garbage collector is off during training (as in
scripts that collect by hand between epochs), so only its end frees them."""

import gc

import torch
from torch import nn

from _weights import save


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.out = out  # a reference cycle: out -> out.grad_fn (this ctx) -> out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.out


gc.disable()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    x = torch.randn(8, 16)
    optimizer.zero_grad()
    loss = Exp.apply(model(x)).mean()
    loss.backward()
    optimizer.step()
gc.enable()
save(model)
