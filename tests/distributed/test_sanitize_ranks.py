"""``torchrun -m trainguard run``: every rank watched, rank 0's merged report (2 gloo ranks, CPU).

Each folder in ``sanitize_cases/`` holds ``buggy.py``, whose lines that must fire are marked
``# expect: TG601`` (every rank must see them: the merged finding lists ranks 0 and 1), and its
``fixed.py`` twin, which must stay silent on both ranks. Every launch is bounded by a timeout and
runs in its own process group, killed on timeout, so a hang fails the test instead of CI.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cliutil import cli_env

HERE = Path(__file__).resolve().parent
CASES = HERE / "sanitize_cases"
TIMEOUT_S = 180
_EXPECT = re.compile(r"#\s*expect:\s*(TG\d{3}(?:\s*,\s*TG\d{3})*)")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(script: Path, cwd: Path, **env: str) -> tuple[int, str, dict | None, float]:
    """``torchrun --nproc-per-node 2 -m trainguard run --report report.json SCRIPT`` in ``cwd``;
    returns (exit status, output, the report or None, seconds)."""
    report = cwd / "report.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), "-m", "trainguard", "run",
           "--report", str(report), str(script)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=cli_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"torchrun did not finish in {TIMEOUT_S}s:\n{out[-4000:]}")
    elapsed = time.monotonic() - start
    data = json.loads(report.read_text()) if report.exists() else None
    return proc.returncode, out, data, elapsed


def _expected(script: Path) -> set[tuple[str, int]]:
    out = set()
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        m = _EXPECT.search(line)
        if m:
            out.update((c.strip(), number) for c in m.group(1).split(","))
    return out


def _cases(name: str) -> list[Path]:
    return sorted(CASES.glob(f"*/{name}"))


def test_every_case_is_complete():
    folders = sorted(p for p in CASES.iterdir() if p.is_dir())
    assert folders
    for folder in folders:
        buggy, fixed = folder / "buggy.py", folder / "fixed.py"
        assert buggy.is_file() and fixed.is_file(), folder.name
        assert _expected(buggy) and not _expected(fixed), folder.name
        assert "http" in buggy.read_text()[:800] and "http" in fixed.read_text()[:800], folder.name


@pytest.mark.parametrize("script", _cases("buggy.py"), ids=lambda p: p.parent.name)
def test_buggy_case_is_reported_once_for_both_ranks(script, tmp_path):
    code, out, report, _ = _launch(script, tmp_path)
    assert code == 0, out[-4000:]
    assert report is not None, out[-4000:]
    seen = {(f["code"], f["line"]) for f in report["findings"]}
    assert all(Path(f["path"]).name == script.name for f in report["findings"]), report
    assert seen == _expected(script), out[-4000:]
    assert all(f["ranks"] == [0, 1] for f in report["findings"]), report["findings"]
    assert report["ranks"]["reported"] == [0, 1] and report["ranks"]["missing"] == []
    # rank 1 prints one line instead of its own table; rank 0 prints the merged table
    assert "trainguard: rank 1: " in out and "sent to rank 0's merged report" in out
    assert out.count("  count  code") == 1, out[-3000:]


@pytest.mark.parametrize("script", _cases("fixed.py"), ids=lambda p: p.parent.name)
def test_fixed_case_is_silent_on_both_ranks(script, tmp_path):
    code, out, report, _ = _launch(script, tmp_path)
    assert code == 0, out[-4000:]
    assert report is not None and report["findings"] == [], out[-4000:]
    assert report["ranks"]["reported"] == [0, 1]
    assert "trainguard: no findings (2 of 2 ranks reported" in out


DIES = '''
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
data = TensorDataset(torch.randn(128, 8), torch.randint(0, 3, (128,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = DistributedDataParallel(nn.Linear(8, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        if dist.get_rank() == 1 and epoch == 1 and step == 1:
            os._exit(1)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
'''


def test_a_rank_that_dies_is_named_and_does_not_hold_rank_0s_report(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(DIES)
    # a long wait allowed on purpose: rank 0 must see that rank 1's process is gone, not time out
    code, out, report, elapsed = _launch(script, tmp_path, TRAINGUARD_RANK_TIMEOUT_S="150")
    assert code != 0, out[-4000:]
    assert report is not None, out[-4000:]
    assert elapsed < 90, f"rank 0 waited for a dead rank: {elapsed:.0f} s"
    assert report["ranks"]["reported"] == [0]
    [missing] = report["ranks"]["missing"]
    assert missing["rank"] == 1 and "exited first" in missing["reason"], missing
    # rank 0's own finding is kept (TG601: the second epoch repeats the first's order)
    assert [(f["code"], f["ranks"]) for f in report["findings"]] == [("TG601", [0])]
    assert "trainguard: rank 1 sent no report: its process" in out
