# Modelled on the torch.enable_grad documentation example
# (https://pytorch.org/docs/stable/generated/torch.enable_grad.html) turned into an evaluation
# helper: a decorator re-enables grad inside the caller's no_grad block, so the evaluation builds
# graphs nobody uses.
import torch
from torch import nn

torch.manual_seed(12)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
model.eval()
data = torch.randn(12, 3)


def predict(batch: torch.Tensor) -> list[float]:
    with torch.enable_grad():  # expect: TG104
        scores = model(batch)
    return scores.squeeze(1).tolist()


with torch.no_grad():
    predictions = [predict(data[i:i + 4]) for i in range(0, 12, 4)]
print(len(predictions))
