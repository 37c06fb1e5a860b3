# Fixed twin of buggy.py (https://github.com/rwth-i6/returnn/pull/1595): the gradients are
# unscaled first, then the clipping helper runs on them.
import torch
from torch import nn

torch.manual_seed(31)


def clip_gradients(model: nn.Module, max_norm: float) -> None:
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


class Engine:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        self.scaler = torch.amp.GradScaler("cpu")

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(self.model(x).float(), y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        clip_gradients(self.model, 1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()


engine = Engine(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)))
x, y = torch.randn(32, 6), torch.randn(32, 1)
for step in range(4):
    last = engine.train_step(x, y)
print(f"loss {last:.3f}")
