"""TG303 is reported at the end of the run, only for an optimizer that never stepped, with the
whole run's counts."""

from __future__ import annotations

import json
import textwrap

from sanitize_helpers import CASES, main_in_process, run_in_process

NEVER_STEPS = textwrap.dedent("""\
    import torch
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range({epochs}):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).pow(2).mean().backward()
        {late_step}
""")


def _tg303(watcher):
    (finding,) = [f for f in watcher.findings if f.code == "TG303"]
    return finding


def test_reported_once_at_exit_with_the_whole_runs_counts(tmp_path, monkeypatch, capsys):
    script = tmp_path / "train.py"
    script.write_text(NEVER_STEPS.format(epochs=9, late_step="pass"))
    monkeypatch.chdir(tmp_path)
    assert main_in_process("run", "--report", "out.json", "train.py") == 0
    printed = [line for line in capsys.readouterr().err.splitlines() if "TG303" in line][0]
    # printed at the end of the run, with the final counts: 9 backward, 8 zero_grad after one
    assert printed.startswith("train.py:6:")
    assert "9 backward calls filled the gradients of SGD's parameters" in printed
    assert "cleared them 8 times" in printed
    (finding,) = json.loads((tmp_path / "out.json").read_text())["findings"]
    assert finding["code"] == "TG303" and finding["count"] == 1 and finding["line"] == 6
    assert finding["message"].startswith(
        "9 backward calls filled the gradients of SGD's parameters (shapes (1, 3), (1,)) and "
        "zero_grad() cleared them 8 times, and SGD.step() was never called in the whole run")


def test_an_optimizer_that_steps_late_is_not_reported(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(NEVER_STEPS.format(epochs=8, late_step="if epoch >= 4: optimizer.step()"))
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    assert [f.code for f in watcher.findings] == []


def test_one_step_after_the_last_zero_grad_counts_as_stepping(tmp_path):
    script = tmp_path / "last.py"
    script.write_text(NEVER_STEPS.format(epochs=5, late_step="pass") + "optimizer.step()\n")
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    assert [f.code for f in watcher.findings] == []


def test_an_optimizer_gone_before_the_end_is_judged_by_its_own_steps(tmp_path):
    body = textwrap.indent(NEVER_STEPS.format(epochs=4, late_step="pass"), "    ")
    for last, expected in (("", ["TG303"]), ("    optimizer.step()\n", [])):
        script = tmp_path / "inner.py"
        script.write_text("def train():\n" + body + last + "\ntrain()\n")
        watcher, status, stderr = run_in_process(script)
        assert status == 0, stderr
        assert [f.code for f in watcher.findings] == expected, last
        if expected:
            assert _tg303(watcher).message.startswith("4 backward calls filled the gradients")


def test_the_case_script_reports_its_four_epochs():
    watcher, status, stderr = run_in_process(CASES / "tg303_step_forgotten" / "buggy.py")
    assert status == 0, stderr
    assert _tg303(watcher).message.startswith("4 backward calls filled the gradients of Adam's")
    assert "cleared them 3 times, and Adam.step() was never called" in _tg303(watcher).message
