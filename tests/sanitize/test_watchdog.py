"""The watchdog (sanitize/watchdog.py): a check that takes more than its share of the run, or
keeps the exit waiting, is stopped and named in one TG002; the run goes on unchanged."""

from __future__ import annotations

import io
import re
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
    """Spends 20 ms of this thread's CPU time in pure Python (no walk to stop it) after every
    optimizer step: CPU time, not wall time, so that on a loaded machine it slows down as the
    training steps around it do, and its share of the run's wall time stays above half."""

    code = "TG301"

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        self.steps = 0

    def on_step(self, optimizer) -> None:
        self.steps += 1
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
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
    # stopped once 0.3 s have passed on both clocks: later on the wall clock when cores are busy
    stopped = re.search(r"own work at exit ran past 0 s: TG201 \(stopped at ([0-9.]+) s, in on_exit\)",
                        note.message)
    assert stopped and float(stopped.group(1)) >= 0.3
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


class _WaitingStep(Check):
    """Waits 20 ms of wall time after every optimizer step without using the CPU: what a check
    looks like on a machine whose cores are busy with other processes."""

    code = "TG301"

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        self.steps = 0

    def on_step(self, optimizer) -> None:
        self.steps += 1
        time.sleep(0.02)


def test_a_check_slowed_only_by_waiting_for_a_core_is_not_stopped(monkeypatch):
    monkeypatch.setattr(watchdog, "FLOOR_S", 0.2)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_WaitingStep],
                      every_step=True)
    _train(150, watcher)
    assert watcher.checks[0].steps == 150  # more than half the wall time, little CPU time
    assert [f.code for f in watcher.findings] == []


def test_the_share_is_judged_on_both_clocks():
    dog = watchdog.Watchdog()
    now = time.perf_counter()
    dog.started, dog.total = now - 10.0, 6.0  # 60% of the wall time, past the 2 s floor
    dog.started_cpu, dog.total_cpu = time.thread_time() - 10.0, 0.5  # 5% of the CPU time
    assert not dog.overrun(now)
    dog.total_cpu = 6.0
    assert dog.overrun(now)
    dog.total = 1.0  # the wall clock disagrees: under the floor
    assert not dog.overrun(now)


def test_the_cpu_clock_is_read_per_event_only_once_the_checks_near_the_floor(monkeypatch):
    """The CPU clock is a system call (on a loaded machine, one that can cost the core): a run
    whose checks stay far under FLOOR_S never reads it around an event; once their wall time
    passes ARM of the floor, every event reads it twice."""
    from trainguard.sanitize import dispatch

    reads = []
    monkeypatch.setattr(dispatch, "thread_time", lambda: reads.append(1) or time.thread_time())
    watcher = Watcher(config=Config(), stream=io.StringIO(), every_step=True)
    _train(20, watcher)
    assert reads == [] and watcher.watchdog.total_cpu == 0.0
    assert watcher.watchdog.total < watchdog.FLOOR_S * watchdog.ARM

    monkeypatch.setattr(watchdog, "FLOOR_S", 0.0)  # armed from the first event
    watcher = Watcher(config=Config(), stream=io.StringIO(), every_step=True)
    _train(20, watcher)
    assert len(reads) > 2 * 20 and len(reads) % 2 == 0
    assert watcher.watchdog.total_cpu > 0.0
