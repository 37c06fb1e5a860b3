"""`trainguard check`: lint findings, runtime findings, one report, exit statuses."""

from __future__ import annotations

import json
import signal
import textwrap

from cliutil import run_cli

BUGGY = textwrap.dedent('''\
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    total = 0
    for step in range(4):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        total += loss
    print("mean loss", float(total) / 4)
''')

FIXED = BUGGY.replace("total += loss", "total += loss.item()")


def test_buggy_script_is_reported_by_both_layers(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    report = tmp_path / "r.json"
    proc = run_cli("check", "--report", str(report), str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "mean loss" in proc.stdout
    found = json.loads(report.read_text())["findings"]
    layers = {(f["code"], f["layer"], f["line"]) for f in found}
    assert ("TG201", "lint", 14) in layers and ("TG201", "run", 14) in layers
    assert "1 lint and 1 runtime finding(s)" in proc.stderr


def test_fixed_twin_is_clean(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(FIXED)
    proc = run_cli("check", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 lint and 0 runtime finding(s)" in proc.stderr


def test_failing_script_passes_its_status_through(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys\nsys.exit(7)\n")
    assert run_cli("check", str(script), cwd=tmp_path).returncode == 7


def test_script_ended_by_sigterm_dies_of_it_after_the_report(tmp_path):
    script = tmp_path / "term.py"
    script.write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\n"
                      "time.sleep(5)\n")
    report = tmp_path / "r.json"
    proc = run_cli("check", "--report", str(report), str(script), cwd=tmp_path)
    assert proc.returncode == -signal.SIGTERM, proc.stderr  # as `python term.py` dies
    assert json.loads(report.read_text()) == {"findings": []}


def test_missing_script_is_a_usage_error(tmp_path):
    proc = run_cli("check", str(tmp_path / "nope.py"))
    assert proc.returncode == 2 and "no such script" in proc.stderr
