# Near miss for TG101: a training step computes a second loss of the same output only to log it
# (MAE next to a Huber training loss, once with grad and once under no_grad), and co-teaching's
# per-sample losses pick the samples of the loss that is backpropagated (bhanML/Co-teaching,
# https://github.com/bhanML/Co-teaching). The output is reached by a backward through the
# training loss: this is training, not an evaluation.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
features, targets = torch.randn(128, 6), torch.randn(128, 3)
labels = torch.randint(0, 3, (128,))
for epoch in range(2):
    model.train()
    logged = 0.0
    for i in range(0, 128, 32):
        x, y, t = features[i:i + 32], targets[i:i + 32], labels[i:i + 32]
        pred = model(x)
        loss = F.smooth_l1_loss(pred, y)
        mae = F.l1_loss(pred, y)  # logged only
        with torch.no_grad():
            rmse = F.mse_loss(pred, y).sqrt()  # logged only
        opt.zero_grad()
        loss.backward()
        opt.step()
        logged += mae.item() + rmse.item()
        scores = model(x)
        per_sample = F.cross_entropy(scores, t, reduction="none")
        keep = per_sample.argsort()[:16]  # the small-loss half
        opt.zero_grad()
        F.cross_entropy(scores[keep], t[keep]).backward()
        opt.step()
print(logged > 0)
