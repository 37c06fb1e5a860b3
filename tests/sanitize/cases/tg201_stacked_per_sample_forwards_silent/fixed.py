# Near miss for TG201, modelled on the atomic-convolution affinity model of
# https://github.com/deepchem/deepchem/pull/5094: each batch runs the model once per sample (one
# complex at a time) and stacks the outputs before the backward. Twenty forwards are alive at the
# first backward call, before any optimizer step, all of one step: nothing is kept, silent.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
samples = [torch.randn(6) for _ in range(60)]
targets = torch.randn(60, 1)
for epoch in range(2):
    for i in range(0, 60, 20):
        preds = torch.stack([model(samples[j]) for j in range(i, i + 20)])
        loss = F.mse_loss(preds, targets[i:i + 20])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
