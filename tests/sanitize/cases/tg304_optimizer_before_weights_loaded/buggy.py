# Modelled on https://github.com/NVIDIA/Megatron-LM/issues/174: fine-tuning from a pre-trained
# checkpoint. setup() builds the optimizer (with a cosine scheduler) for a fresh model, then
# replaces the model with one loaded from the checkpoint: the fine-tuning steps update the fresh
# model's parameters, which get no gradients, and the loaded model never changes. The
# pre-training run's optimizer is still alive, with gradients left on its parameters: only the
# optimizers stepping now count when deciding that the one stepping holds no gradient.
import io

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def build():
    return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4))


def setup(checkpoint=None):
    model = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 40)
    if checkpoint is not None:
        model = build()  # expect: TG304
        model.load_state_dict(torch.load(checkpoint, weights_only=True))
    return model, optimizer, scheduler


def train(model, optimizer, scheduler, x, y, steps):
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return loss.item()


x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))
base = setup()  # (kept: the pre-trained model, its optimizer with its last gradients)
print("pre-train", train(*base, x, y, 40))
buffer = io.BytesIO()
torch.save(base[0].state_dict(), buffer)
buffer.seek(0)
model, optimizer, scheduler = setup(buffer)
print("fine-tune", train(model, optimizer, scheduler, x, (y + 1) % 4, 40))
