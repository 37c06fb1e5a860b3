"""``trainguard run`` on CUDA: what only a GPU exercises (asynchronous values, GradScaler's
skipped steps, two real devices in one op, cuDNN), each script run as ``python`` would run it.
Skipped without a CUDA device."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from sanitize_helpers import run_tg

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

_AMP = """
import hashlib, sys
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.Flatten(), nn.Linear(16 * 16 * 16, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
# a loss scale far too large: GradScaler skips the first steps (inf gradients), as it is meant to
scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 40)
g = torch.Generator(device="cuda").manual_seed(1)
skipped = 0
for step in range(40):
    x = torch.randn(32, 3, 16, 16, device="cuda", generator=g)
    y = torch.randint(0, 10, (32,), device="cuda", generator=g)
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    before = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped += scaler.get_scale() < before
digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes()
                                 for p in model.parameters())).hexdigest()
print("SKIPPED", skipped)
print("DIGEST", digest)
"""

_DEVICES = """
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 16)  # made on the CPU: the model is on the GPU
        out, _ = self.rnn(x, h0)
        return self.head(out[:, -1])


model = Tagger().cuda()
opt = torch.optim.Adam(model.parameters())
x, y = torch.randn(4, 5, 8, device="cuda"), torch.randint(0, 3, (4,), device="cuda")
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
opt.step()
"""

_EVAL_IN_TRAIN = """
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 2)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    model.train()
    for _ in range(20):
        x = torch.randn(32, 20, device="cuda")
        y = (x[:, 0] > 0).long()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    correct = 0
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(64, 20, device="cuda")
            correct += (model(x).argmax(1) == (x[:, 0] > 0).long()).sum().item()
    print(epoch, correct / 320)
"""


def _write(tmp_path, text: str) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(text))


def _report(tmp_path) -> list[dict]:
    return json.loads((tmp_path / "out.json").read_text())["findings"]


def test_amp_with_skipped_steps_is_silent_and_changes_no_weight(tmp_path):
    # GradScaler skips steps whose gradients overflowed: TG405 must not call them non-finite,
    # and watching must not change a single weight (cuDNN deterministic, same seed).
    import subprocess
    import sys

    from cliutil import cli_env

    _write(tmp_path, _AMP)
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=cli_env(),
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    watched = run_tg("run", "--report", "out.json", "train.py", cwd=tmp_path, timeout=300)
    assert watched.returncode == 0, watched.stderr
    assert "SKIPPED 0" not in plain.stdout  # the scaler did skip steps
    digest = [line for line in plain.stdout.splitlines() if line.startswith("DIGEST")]
    assert digest and digest[0] in watched.stdout
    assert _report(tmp_path) == []


def test_tensors_on_two_devices_are_diagnosed_at_the_users_line(tmp_path):
    _write(tmp_path, _DEVICES)
    proc = run_tg("run", "--report", "out.json", "train.py", cwd=tmp_path, timeout=300)
    assert proc.returncode != 0  # the script's own error still ends it
    found = [f for f in _report(tmp_path) if f["code"] == "TG702"]
    assert found, proc.stderr
    assert found[0]["path"] == "train.py"
    assert "cuda" in found[0]["message"] and "cpu" in found[0]["message"]


def test_evaluation_in_train_mode_on_cuda(tmp_path):
    _write(tmp_path, _EVAL_IN_TRAIN)
    proc = run_tg("run", "--report", "out.json", "train.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [f["code"] for f in _report(tmp_path)] == ["TG101"]


def test_env_reports_the_device(tmp_path):
    proc = run_tg("env", "--format", "json", cwd=tmp_path, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr  # 1: something does not fit (named in it)
    info = json.loads(proc.stdout)
    text = json.dumps(info).lower()
    assert "cuda" in text and torch.cuda.get_device_name(0).lower() in text


_DIVERGES = """
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=5.0)  # far too large: the loss blows up
first_bad = None
for step in range(1, 61):
    x = torch.randn(64, 8, device="cuda") * 10
    loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True) ** 2)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if first_bad is None and not torch.isfinite(loss).item():
        first_bad = step
print("FIRST_BAD", first_bad)
"""


def test_a_non_finite_loss_on_cuda_is_found_at_its_step(tmp_path):
    _write(tmp_path, _DIVERGES)
    proc = run_tg("run", "--report", "out.json", "train.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = int(proc.stdout.split("FIRST_BAD")[1].split()[0])
    (found,) = [f for f in _report(tmp_path) if f["code"] == "TG405"]
    assert f"optimizer step {first} " in found["message"], found["message"]
