"""Findings at the line to change when a framework's loop calls the user's code: a ``train()``
that undid an ``eval()`` (TG101), a parameter added to a built model (TG304), an attribute of an
object accumulated in its own method (TG201), a generator reseeded from the OS (TG501). Plain
PyTorch here, each with its fixed twin; the same mechanisms serve Lightning's and Hugging Face's
hooks (tests/integrations)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sanitize_helpers import run_in_process

HEAD = """import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
np.random.seed(0)
x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
"""

# Modelled on the Lightning report of `self.train()` left in `validation_step`
# (Lightning-AI/pytorch-lightning#6432 discusses modes restored around evaluation): the eval loop
# put the model in eval mode, the user's hook undid it.
TG101 = HEAD + """model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def validation_step():
    {bug}
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


for epoch in range(3):
    model.train()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.eval()
    validation_step()
"""

# A head added after the optimizer was built (PyTorch forum, "Adding new parameters to an
# existing optimizer": add_param_group is the remedy).
TG304 = HEAD + """class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 2)

    def forward(self, x):
        out = self.body(x)
        return out + self.shift if hasattr(self, "shift") else out


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    if step == 1:
        model.shift = nn.Parameter(torch.zeros(2))
        {fix}
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

# The step lives in the model's method and keeps its loss on `self` (PyTorch FAQ: "Don't
# accumulate history across your training loop"); the loop that calls it holds only `model`.
TG201 = HEAD + """class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 2)
        self.losses = []

    def training_step(self, x, y):
        loss = nn.functional.cross_entropy(self.body(x), y)
        self.losses.append({kept})
        return loss


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(12):
    loss = model.training_step(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

# Reseeding from the OS every epoch "for fresh augmentation" undoes the run's seed.
TG501 = HEAD + """model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    np.random.seed({seed})
    noise = torch.from_numpy(np.random.rand(32, 4)).float()
    for step in range(4):
        loss = nn.functional.cross_entropy(model(x + 0.01 * noise), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

CASES = {
    # name: (template, buggy fill, fixed fill, expected code, expected line)
    "tg101-train-in-eval": (TG101, {"bug": "model.train()"}, {"bug": "pass"}, "TG101", 13),
    "tg304-added": (TG304, {"fix": "pass"},
                    {"fix": "optimizer.add_param_group({'params': [model.shift]})"}, "TG304", 22),
    "tg201-on-self": (TG201, {"kept": "loss"}, {"kept": "loss.item()"}, "TG201", 16),
    "tg501-reseeded": (TG501, {"seed": ""}, {"seed": "epoch"}, "TG501", 11),
}


@pytest.mark.parametrize("name", CASES)
def test_buggy_reported_at_the_cause_and_fixed_twin_silent(tmp_path: Path, monkeypatch,
                                                           name: str) -> None:
    monkeypatch.chdir(tmp_path)
    template, buggy, fixed, code, line = CASES[name]
    script = tmp_path / "train.py"
    script.write_text(template.format(**buggy))
    watcher, status, err = run_in_process(script)
    assert status == 0, err
    assert [(f.code, f.line) for f in watcher.findings] == [(code, line)], err
    script.write_text(template.format(**fixed))
    watcher, status, err = run_in_process(script)
    assert status == 0, err
    assert watcher.findings == [], err
