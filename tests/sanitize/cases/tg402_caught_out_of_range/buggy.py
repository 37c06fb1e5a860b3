# Modelled on TencentGameMate/gnn_cross_lingual#5
# (https://github.com/TencentGameMate/gnn_cross_lingual/issues/5): intent labels run up to 17
# while --num_labels defaults to 12, and the fine-tuning loop catches the IndexError and exits
# with its own message, so the error's explanation never reaches the traceback. Fixed twin:
# --num_labels defaults to the number of intents.
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

INTENTS = [f"intent_{i}" for i in range(18)]


def finetune(args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, args.num_labels))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(5):
        x = torch.randn(8, 16)
        labels = torch.arange(step * 8, step * 8 + 8) % len(INTENTS)
        logits = model(x)
        loss = F.cross_entropy(logits, labels)  # expect: TG402
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--num_labels", type=int, default=12)
    try:
        finetune(p.parse_args([]))
    except IndexError as err:
        print(f"fine-tuning failed: {err}")
        sys.exit(1)
