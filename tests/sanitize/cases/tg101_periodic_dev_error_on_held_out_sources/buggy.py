# Report: https://github.com/IBM/pytorch-seq2seq/pull/38
# Modelled on IBM/pytorch-seq2seq#38 ("Set model in eval mode when inferencing"): a sequence model
# is scored on the held-out sources every few epochs inside the training loop, under no_grad but
# never in eval mode, so Dropout still drops and BatchNorm normalises with (and updates from) the
# batch statistics of the development set. The score is a hand-written L1 error turned into a
# Python number, no metric call and no loss function.
import torch
from torch import nn

torch.manual_seed(0)
steps = torch.linspace(0, 6.0, 32)
freqs = torch.rand(240, 1) * 2 + 1
clean = torch.sin(freqs * steps)
noisy = clean + 0.2 * torch.randn_like(clean)
train_src, train_tgt = noisy[:200], clean[:200]
valid_src, valid_tgt = noisy[200:], clean[200:]

model = nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(64, 32))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
dev_errors = []
for epoch in range(4):
    model.train()
    for i in range(0, 200, 40):
        loss = (model(train_src[i:i + 40]) - train_tgt[i:i + 40]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if epoch % 2 == 1:
        with torch.no_grad():  # expect: TG101
            dev_err = (model(valid_src) - valid_tgt).abs().mean().item()
        dev_errors.append(dev_err)
print("dev L1 per check:", [round(e, 4) for e in dev_errors])
