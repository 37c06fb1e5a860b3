"""The cross-rank machinery without a launcher: ranks simulated in one process, one after the other,
sharing an in-memory c10d ``HashStore``; the real 2-process runs are in
``tests/distributed/test_sanitize_ranks.py``."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from trainguard.config import Config
from trainguard.findings import Finding
from trainguard.sanitize.ranks.merge import merge_findings
from trainguard.sanitize.ranks import DEFAULT_TIMEOUT_S, RankLink, exit_guard
from trainguard.sanitize.watcher import Watcher

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")


def _env(rank: int, world: int = 2, **extra: str) -> dict[str, str]:
    return {"RANK": str(rank), "WORLD_SIZE": str(world), **extra}


def _link(store, rank: int, *, timeout_s: float = 5.0) -> RankLink:
    link = RankLink.from_env(_env(rank, TRAINGUARD_RANK_TIMEOUT_S=str(timeout_s)))
    link.prefix = "test/"
    link._store = dist.PrefixStore(link.prefix, store)
    return link


# ---- launcher variables ------------------------------------------------------------------------
@pytest.mark.parametrize("env", [{}, {"WORLD_SIZE": "1"}, {"WORLD_SIZE": "two", "RANK": "0"},
                                 {"WORLD_SIZE": "2", "RANK": "2"}, {"WORLD_SIZE": "2", "RANK": "-1"}])
def test_no_link_outside_a_multi_process_launch(env):
    assert RankLink.from_env(env) is None


def test_link_reads_rank_world_and_timeout():
    link = RankLink.from_env(_env(1, 4, TRAINGUARD_RANK_TIMEOUT_S="2.5",
                                  TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RUN_ID="job7",
                                  TORCHELASTIC_RESTART_COUNT="3"))
    assert (link.rank, link.world_size, link.timeout_s, link.agent) == (1, 4, 2.5, True)
    assert link.prefix.startswith("trainguard/job7/3/") and link.note is None


@pytest.mark.parametrize("raw", ["soon", "0", "-3", "inf", "nan"])
def test_a_bad_timeout_falls_back_to_the_default_and_says_so(raw):
    link = RankLink.from_env(_env(0, TRAINGUARD_RANK_TIMEOUT_S=raw))
    assert link.timeout_s == DEFAULT_TIMEOUT_S
    assert f"TRAINGUARD_RANK_TIMEOUT_S={raw!r}" in link.note


# ---- merging -------------------------------------------------------------------------------------
def _finding(code: str, line: int, count: int = 1, message: str = "m") -> dict:
    return Finding.make(code, layer="run", path="train.py", line=line, message=message,
                        count=count).to_dict()


def test_one_finding_per_place_with_the_ranks_that_saw_it():
    merged = merge_findings({
        0: [_finding("TG601", 17, message="rank 0's words")],
        1: [_finding("TG601", 17, count=3, message="rank 1's words"), _finding("TG301", 30)],
        2: [_finding("TG601", 17)],
    })
    assert [(f.code, f.line, f.ranks, f.count) for f in merged] == [
        ("TG601", 17, [0, 1, 2], 3), ("TG301", 30, [1], 1)]
    assert merged[0].message == "rank 0's words"
    assert merged[0].to_dict()["ranks"] == [0, 1, 2]


# ---- gathering -----------------------------------------------------------------------------------
def test_rank_0_gathers_what_the_others_sent():
    store = dist.HashStore()
    one = _link(store, 1)
    assert one.put("report/1", {"rank": 1, "findings": [], "steps": 7})
    one._call(lambda s: s.add("reported", 1))
    zero = _link(store, 0)
    assert zero.gather() == {1: {"rank": 1, "findings": [], "steps": 7}}
    assert zero.missing == []


def _exited_pid(*, reap: bool) -> tuple[int, subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    if reap:
        proc.wait()
    else:  # a zombie: exited, not yet reaped by its parent (the launcher's agent, in real runs)
        while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            time.sleep(0.01)
    return proc.pid, proc


@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
def test_a_rank_whose_process_is_gone_is_not_waited_for(reap):
    store = dist.HashStore()
    pid, proc = _exited_pid(reap=reap)
    one = _link(store, 1)
    one.put("hello/1", {"host": one.host, "pid": pid})
    zero = _link(store, 0, timeout_s=60)
    start = time.monotonic()
    assert zero.gather() == {}
    assert time.monotonic() - start < 5
    [missing] = zero.missing
    assert missing.rank == 1 and f"its process ({pid} on {one.host}) exited first" in missing.reason
    proc.wait()


def test_a_live_rank_that_never_reports_times_out():
    store = dist.HashStore()
    one = _link(store, 1)
    one.put("hello/1", {"host": one.host, "pid": os.getpid()})  # alive: this very process
    zero = _link(store, 0, timeout_s=0.3)
    start = time.monotonic()
    assert zero.gather() == {}
    assert 0.3 <= time.monotonic() - start < 3
    assert [m.rank for m in zero.missing] == [1]
    assert "nothing arrived within 0.3 s" in zero.missing[0].reason


class _FailingStore:
    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise RuntimeError("Connection reset by peer")
        return fail


def test_a_store_that_fails_never_raises_into_the_run():
    zero = RankLink.from_env(_env(0))
    zero._store = _FailingStore()
    assert zero.gather() == {}
    assert zero.broken and "Connection reset by peer" in zero.broken
    assert "Connection reset by peer" in zero.missing[0].reason
    assert zero.put("x", 1) is False and zero.ready(["x"]) is None  # switched off, quietly


def test_sigterm_during_the_exit_is_held_until_the_report_is_written():
    received = []
    previous = signal.signal(signal.SIGTERM, lambda *a: received.append("term"))
    try:
        link = _link(dist.HashStore(), 0, timeout_s=60)
        with exit_guard(link):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert received == [] and link.terminated
            start = time.monotonic()
            link.gather()  # stops waiting at once
            assert time.monotonic() - start < 1
            assert "asked to stop" in link.missing[0].reason
        assert received == ["term"]  # delivered to the handler that was there before
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_stop_that_follows_a_ranks_exit_names_the_exit():
    # torchrun stops rank 0 because rank 1 died: the reason is rank 1's exit, not the stop
    store = dist.HashStore()
    pid, proc = _exited_pid(reap=True)
    one = _link(store, 1)
    one.put("hello/1", {"host": one.host, "pid": pid})
    alive = RankLink.from_env(_env(2, world=3))  # a rank still running (this process) gets the stop as its reason
    alive._store = dist.PrefixStore("test/", store)
    alive.put("hello/2", {"host": alive.host, "pid": os.getpid()})
    zero = RankLink.from_env(_env(0, world=3, TRAINGUARD_RANK_TIMEOUT_S="60"))
    zero.prefix = "test/"
    zero._store = dist.PrefixStore(zero.prefix, store)
    zero.terminated = True
    assert zero.gather() == {}
    reasons = {m.rank: m.reason for m in zero.missing}
    assert f"its process ({pid} on {one.host}) exited first" in reasons[1]
    assert reasons[2] == "not waited for: rank 0 was asked to stop while waiting"
    proc.wait()


# ---- two ranks in one process, end to end -------------------------------------------------------
def _train_rank(rank: int, tmp_path, *, wrapped: bool = False) -> None:
    """A rank's script: a sampler without set_epoch, an unwrapped model, a save to one path."""
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    sampler = DistributedSampler(data, num_replicas=2, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    torch.save(model.state_dict(), tmp_path / "model.pt")
    torch.save(model.state_dict(), tmp_path / f"model_rank{rank}.pt")


def _watched_rank(rank: int, store, monkeypatch, tmp_path) -> tuple[Watcher, str]:
    for key, value in _env(rank).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    stream = io.StringIO()
    watcher = Watcher(config=Config(), stream=stream)
    watcher.ranks.prefix = "test/"
    watcher.ranks._store = dist.PrefixStore("test/", store)
    watcher.ranks._hello_sent = True
    watcher.start()
    try:
        _train_rank(rank, tmp_path)
    finally:
        watcher.stop()
    watcher.print_summary()
    return watcher, stream.getvalue()


def test_two_ranks_merge_into_one_report(monkeypatch, tmp_path):
    store = dist.HashStore()
    one, one_out = _watched_rank(1, store, monkeypatch, tmp_path)
    assert one.ranks.sent
    assert one_out.splitlines()[-1] == ("trainguard: rank 1: 1 finding, sent to rank 0's merged "
                                        "report")
    assert "[rank 1] " in one_out  # live findings say which rank saw them
    zero, zero_out = _watched_rank(0, store, monkeypatch, tmp_path)
    by_code = {f.code: f for f in zero.findings}
    assert sorted(by_code) == ["TG601", "TG602", "TG604"]
    assert all(f.ranks == [0, 1] for f in zero.findings)
    assert "after optimizer step 1 the replicas differ: rank 1 holds other parameters" in \
        by_code["TG604"].message
    assert "`weight` (2, 4)" in by_code["TG604"].message
    assert "not wrapped in DistributedDataParallel" in by_code["TG604"].message
    assert "model.pt" in by_code["TG602"].message and "model_rank" not in by_code["TG602"].message
    assert "3 findings (2 of 2 ranks reported)" in zero_out
    zero.write_json(tmp_path / "report.json")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ranks"] == {"world_size": 2, "reported": [0, 1],
                               "steps": {"0": 8, "1": 8}, "missing": []}


def _same_shards_rank(rank: int, *, extra_step: bool, reload: bool) -> None:
    """Both ranks see identical data (row 2k equals row 2k+1), so they stay replicas, until rank 1
    takes one more optimizer step at the end (``extra_step``) or rank 0 reloads its first weights
    after training (``reload``, legitimate: a final test with the best weights)."""
    torch.manual_seed(0)
    x, y = torch.randn(16, 4).repeat_interleave(2, 0), torch.randint(0, 2, (16,)).repeat_interleave(2)
    data = TensorDataset(x, y)
    loader = DataLoader(data, batch_size=4,
                        sampler=DistributedSampler(data, num_replicas=2, rank=rank, shuffle=False))
    model = nn.Linear(4, 2)
    first = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    if extra_step and rank == 1:
        optimizer.step()
    if reload and rank == 0:
        model.load_state_dict(first)


@pytest.mark.parametrize("extra_step,reload,fires", [(True, False, True), (False, True, False),
                                                     (False, False, False)])
def test_replicas_compared_at_exit(extra_step, reload, fires, monkeypatch):
    store = dist.HashStore()
    watchers = []
    for rank in (1, 0):
        for key, value in _env(rank).items():
            monkeypatch.setenv(key, value)
        watcher = Watcher(config=Config(), stream=io.StringIO())
        watcher.ranks._store = dist.PrefixStore("test/", store)
        watcher.ranks._hello_sent = True
        watcher.start()
        try:
            _same_shards_rank(rank, extra_step=extra_step, reload=reload)
        finally:
            watcher.stop()
        watchers.append(watcher)
    findings = [f for f in watchers[1].findings if f.code == "TG604"]
    assert len(findings) == int(fires)
    if fires:
        assert findings[0].message.startswith(
            "at exit (rank 0: 4 steps, rank 1: 5 steps) the replicas differ: rank 1 holds")
        assert findings[0].ranks == [0, 1]


def test_a_rank_that_cannot_send_prints_its_own_table(monkeypatch, tmp_path):
    for key, value in _env(1).items():
        monkeypatch.setenv(key, value)
    watcher = Watcher(config=Config(), stream=io.StringIO())
    watcher.ranks._store = _FailingStore()
    watcher.ranks._hello_sent = True
    watcher.start()
    try:
        _train_rank(1, tmp_path)
    finally:
        watcher.stop()
    assert not watcher.ranks.sent
    text = watcher.summary()
    assert text.startswith("trainguard: rank 1: could not send to rank 0 (the c10d store failed: "
                           "RuntimeError: Connection reset by peer); this rank's findings:")
    assert "TG601  sampler-epoch-not-set  1" in text
