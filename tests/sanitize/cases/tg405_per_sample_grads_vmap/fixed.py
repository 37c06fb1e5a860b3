# Modelled on PyTorch's per-sample-gradients recipe
# (https://pytorch.org/tutorials/intermediate/per_sample_grads.html): the loss of one sample is
# computed inside torch.func.grad, vmapped over the batch, and the clipped, noised mean of the
# per-sample gradients is written to .grad before an optimizer step (DP-SGD). Inside vmap the
# loss is a wrapper tensor whose value cannot be read; a correct script: silent, with no check
# failing.
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(256, 10), torch.randint(0, 3, (256,))


def sample_loss(params, buffers, xi, yi):
    logits = functional_call(model, (params, buffers), (xi.unsqueeze(0),))
    return F.cross_entropy(logits, yi.unsqueeze(0))


per_sample = vmap(grad(sample_loss), in_dims=(None, None, 0, 0))
clip, noise = 1.0, 0.5
for step in range(20):
    idx = torch.randint(0, 256, (32,))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    grads = per_sample(params, buffers, x[idx], y[idx])
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
    scale = (clip / (norms + 1e-6)).clamp(max=1.0)
    for name, p in model.named_parameters():
        g = (grads[name] * scale.view(-1, *[1] * (grads[name].dim() - 1))).sum(0)
        p.grad = (g + noise * clip * torch.randn_like(g)) / len(idx)
    optimizer.step()
    optimizer.zero_grad()
with torch.no_grad():
    print(f"loss {F.cross_entropy(model(x), y).item():.3f}")
