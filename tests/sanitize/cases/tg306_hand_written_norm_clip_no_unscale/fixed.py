# Modelled on GitHub rwth-i6/returnn#1590 (https://github.com/rwth-i6/returnn/issues/1590): the
# updater clipped the global gradient norm while a GradScaler still had the gradients scaled
# (scaler.step unscaled them later), so with AMP the configured threshold met gradients 65536
# times too large and every update was cut far below the intended size. Here the clip is the
# updater's own code, not torch.nn.utils.clip_grad_norm_.
import torch
from torch import nn

CONFIG = {"learning_rate": 0.05, "gradient_clip_global_norm": 1.0, "torch_amp": True}


def global_norm_clip_(params, max_norm):
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.sqrt(sum((g.float() ** 2).sum() for g in grads))
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for g in grads:
            g.mul_(coef)
    return total


class Updater:
    def __init__(self, model, config) -> None:
        self.model, self.config = model, config
        self.optimizer = torch.optim.SGD(model.parameters(), lr=config["learning_rate"])
        self.grad_scaler = torch.amp.GradScaler("cpu", enabled=config["torch_amp"])

    def update(self, loss):
        self.optimizer.zero_grad()
        self.grad_scaler.scale(loss).backward()
        self.grad_scaler.unscale_(self.optimizer)
        global_norm_clip_(self.model.parameters(), self.config["gradient_clip_global_norm"])
        self.grad_scaler.step(self.optimizer)
        self.grad_scaler.update()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
updater = Updater(model, CONFIG)
frames = torch.randn(256, 20)
targets = (frames[:, :5].argmax(1) + frames[:, 5:10].argmax(1)) % 5
for step in range(40):
    idx = torch.randint(0, 256, (32,))
    loss = nn.functional.cross_entropy(model(frames[idx]), targets[idx])
    updater.update(loss)
print(f"final loss {loss.item():.4f}")
