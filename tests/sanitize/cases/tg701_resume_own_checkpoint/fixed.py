# Near miss for TG701: a script that resumes from the checkpoint it writes itself, with
# weights_only=False because the checkpoint holds a pickled dataclass; resuming runs is the case in
# https://github.com/mj-will/nessai/pull/455 (docs: https://pytorch.org/docs/stable/notes/serialization.html).
import os
import tempfile
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class RunInfo:
    epoch: int
    note: str


model = nn.Linear(3, 2)
path = os.path.join(tempfile.mkdtemp(), "resume.pt")
torch.save({"model": model.state_dict(), "info": RunInfo(2, "warm start")}, path)
state = torch.load(path, weights_only=False)
model.load_state_dict(state["model"])
print(state["info"].epoch)
