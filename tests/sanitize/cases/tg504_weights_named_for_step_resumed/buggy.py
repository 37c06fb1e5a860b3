# Modelled on GitHub SamsungSAILMontreal/TinyRecursiveModels#56
# (https://github.com/SamsungSAILMontreal/TinyRecursiveModels/pull/56): a preemptible job writes
# only the model's state_dict to a file named for the step ("step_20") and resumes from it by
# reading the step back out of the name; AdamW restarts with empty moments, so the resumed run is
# not the one that would have continued. The fix saves the optimizer's state with the weights.
import os
import re
import tempfile

import torch
import torch.nn.functional as F
from torch import nn


class Job:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-2)
        self.step = 0

    def train_until(self, last: int, folder: str | None = None, every: int = 10) -> None:
        while self.step < last:
            g = torch.Generator().manual_seed(self.step)
            x = torch.randn(16, 8, generator=g)
            loss = F.mse_loss(self.net(x), x.sum(1, keepdim=True))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.step += 1
            if folder is not None and self.step % every == 0:
                self.save(os.path.join(folder, f"step_{self.step}"))

    def save(self, path: str) -> None:
        torch.save(self.net.state_dict(), path)  # expect: TG504

    def resume(self, path: str) -> None:
        self.net.load_state_dict(torch.load(path))
        self.step = int(re.search(r"step_(\d+)", path).group(1))


folder = tempfile.mkdtemp()
Job().train_until(10, folder)
job = Job()
job.resume(os.path.join(folder, "step_10"))
job.train_until(30)
print("resumed to step", job.step)
