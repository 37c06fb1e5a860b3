# Report: https://github.com/huggingface/transformers/issues/2995
# Modelled on huggingface/transformers#2995 ("No optimizer steps when gradient_accumulation_steps
# smaller than epoch_iterator length"): a GLUE-style loop clips, steps the optimizer and the
# scheduler and zeroes the model only `if (step + 1) % gradient_accumulation_steps == 0`; with
# fewer batches per epoch than the accumulation window that test is never true, so backward runs
# every batch and the weights never change. The block only steps: its condition is the line to
# change. Fixed twin: the test also steps at the epoch's last batch.
import torch
import torch.nn.functional as F
from torch import nn


def train(model, batches, epochs: int, accumulation_steps: int) -> int:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))
    global_step = 0
    model.zero_grad()
    for _ in range(epochs):
        for step, (x, y) in enumerate(batches):
            loss = F.cross_entropy(model(x), y) / accumulation_steps
            loss.backward()
            if (step + 1) % accumulation_steps == 0:  # expect: TG303
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                model.zero_grad()
                global_step += 1
    return global_step


torch.manual_seed(0)
data = [(torch.randn(8, 16), torch.randint(0, 3, (8,))) for _ in range(5)]
net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 3))
print(f"optimizer steps: {train(net, data, epochs=3, accumulation_steps=8)}")
