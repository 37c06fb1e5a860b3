# Modelled on the pull request "Save scaler state dict when checkpointing"
# (https://github.com/huggingface/transformers/pull/11663): a mixed-precision loop checkpoints
# model, optimizer, scheduler and epoch, but not the GradScaler, so a resumed run starts again
# from the initial loss scale and is not the run that would have continued.
import os
import tempfile

import torch
from torch import nn


def train_epoch(model, optimizer, scaler, batches):
    for x, y in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def main(folder):
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    batches = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
    for epoch in range(3):
        train_epoch(model, optimizer, scaler, batches)
        scheduler.step()
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "lr_scheduler": scheduler.state_dict(), "epoch": epoch}  # expect: TG504
        torch.save(state, os.path.join(folder, "last.pt"))


with tempfile.TemporaryDirectory() as folder:
    main(folder)
print("done")
