# Report: https://github.com/microsoft/nni/issues/4521
# Modelled on microsoft/nni#4521 ("The parameters are not updated when the pruned model is
# finetuned"): a speed-up step replaced pruned layers with smaller ones after the optimizer for
# fine-tuning existed, so the optimizer still held the old layers' weights. Here a regression
# run keeps its optimizer inside a state object; a helper then swaps the hidden layer for a
# narrower one. The script's call of that helper is the line after which the optimizer must be
# rebuilt; the helper's assignment is named in the message.
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class RunState:
    model: nn.Sequential
    optimizer: torch.optim.Optimizer


def shrink_hidden(model: nn.Sequential, keep: int) -> None:
    old = model[0]
    model[0] = nn.Linear(old.in_features, keep)
    model[2] = nn.Linear(keep, model[2].out_features)


def fine_tune(state: RunState, steps: int = 60) -> float:
    x = torch.randn(64, 10)
    y = x[:, :1] * 2.0 - x[:, 1:2]
    for _ in range(steps):
        loss = nn.functional.mse_loss(state.model(x), y)
        state.optimizer.zero_grad()
        loss.backward()
        state.optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    state = RunState(model, torch.optim.Adam(model.parameters(), lr=1e-2))
    shrink_hidden(model, keep=12)  # expect: TG304
    print(f"loss after fine-tuning: {fine_tune(state):.4f}")


if __name__ == "__main__":
    main()
