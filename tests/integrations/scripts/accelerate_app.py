"""An Accelerate training script that saves its whole state each epoch and resumes from it.

    python accelerate_app.py --dir DIR [--epochs N]

Run it twice: the second run finds DIR/state, restores it with ``accelerator.load_state`` (model,
optimizer, scheduler, RNG states and the registered ``Progress``) and trains the remaining epochs.
"""

import argparse
import os

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Progress:
    """The epoch count, saved with the rest of the state (``register_for_checkpointing``)."""

    def __init__(self):
        self.epoch = 0

    def state_dict(self):
        return {"epoch": self.epoch}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    set_seed(0)
    accelerator = Accelerator(cpu=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    progress = Progress()
    accelerator.register_for_checkpointing(progress)
    state_dir = os.path.join(args.dir, "state")
    if os.path.isdir(state_dir):
        accelerator.load_state(state_dir)
    while progress.epoch < args.epochs:
        model.train()
        for inputs, targets in loader:
            loss = nn.functional.cross_entropy(model(inputs), targets)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
        scheduler.step()
        progress.epoch += 1
        accelerator.save_state(state_dir)
    model.eval()
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    accelerator.print(f"epoch {progress.epoch}: accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
