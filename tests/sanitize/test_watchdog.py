"""The watchdog (sanitize/watchdog.py): a check that takes more than its share of the run, or
keeps the exit waiting, is stopped and named in one TG002; the run goes on unchanged."""

from __future__ import annotations

import io
import time

import torch
import torch.nn.functional as F
from torch import nn

from trainguard.config import Config
from trainguard.sanitize.core import watchdog
from trainguard.sanitize.checks import Check
from trainguard.sanitize.core.holders import graph_nodes
from trainguard.sanitize.watcher import Watcher


class _SlowStep(Check):
    """Spends 20 ms of pure Python (no walk to stop it) after every optimizer step."""

    code = "TG301"

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        self.steps = 0

    def on_step(self, optimizer) -> None:
        self.steps += 1
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass


class _EndlessExitWalk(Check):
    """Walks the last loss's graph over and over at exit: only the watchdog ends it."""

    code = "TG201"

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        self.loss = None
        self.finished = False

    def on_backward(self, call) -> None:
        self.loss = call.tensors[0]

    def on_exit(self) -> None:
        end = time.perf_counter() + 60
        while time.perf_counter() < end:
            for _ in graph_nodes(self.loss.grad_fn):
                pass
        self.finished = True


class _Quiet(Check):
    """Reports at exit, after the slow check: it must still run."""

    code = "TG303"

    def on_exit(self) -> None:
        self.report("a finding made at exit", where=("train.py", 1, 1))


def _train(steps: int, watcher: Watcher | None) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    if watcher is not None:
        watcher.start()
    try:
        for _ in range(steps):
            x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    finally:
        if watcher is not None:
            watcher.stop()
    return [p.detach().clone() for p in model.parameters()]


def test_a_check_taking_more_than_half_the_run_is_stopped_and_the_run_goes_on(monkeypatch):
    monkeypatch.setattr(watchdog, "FLOOR_S", 0.2)
    plain = _train(150, None)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_SlowStep],
                      every_step=True)
    watched = _train(150, watcher)
    assert all(torch.equal(a, b) for a, b in zip(plain, watched))
    slow = watcher.checks[0]
    assert 0 < slow.steps < 150  # stopped once it had its 0.2 s and half the run
    [finding] = watcher.findings
    assert finding.code == "TG002" and "check TG301 took" in finding.message
    assert "more than half" in finding.message and "switched off" in finding.message
    assert watcher.state.step == 150  # the counters went on


def test_exit_work_past_its_time_is_stopped_and_named_once(monkeypatch):
    monkeypatch.setattr(watchdog, "EXIT_S", 0.3)
    monkeypatch.setattr("trainguard.sanitize.watcher.EXIT_S", 0.3)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_EndlessExitWalk, _Quiet])
    _train(3, watcher)
    slow, quiet = watcher.checks
    assert not slow.finished
    codes = sorted(f.code for f in watcher.findings)
    assert codes == ["TG002", "TG303"]  # the check after it still ran (and found its time out)
    [note] = [f for f in watcher.findings if f.code == "TG002"]
    assert "own work at exit ran past 0 s: TG201 (stopped at 0.3 s, in on_exit)" in note.message
    assert 0.3 <= watcher.watchdog.exit_s


def test_the_scripts_output_and_exit_status_stay_its_own(monkeypatch, tmp_path, capsys):
    from trainguard.sanitize.runner import run_target

    monkeypatch.setattr(watchdog, "EXIT_S", 0.3)
    script = tmp_path / "train.py"
    script.write_text("import sys\nimport torch\nfrom torch import nn\n"
                      "model = nn.Linear(2, 1)\nloss = model(torch.ones(3, 2)).sum()\n"
                      "loss.backward()\nprint('trained')\nsys.exit(3)\n")
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_EndlessExitWalk]).start()
    try:
        status = run_target(str(script), [], kind="path", on_error=watcher.explain)
    finally:
        watcher.stop()
    assert status == 3 and capsys.readouterr().out == "trained\n"
    assert [f.code for f in watcher.findings] == ["TG002"]
