"""TG303's message gives the whole run's counts in the final report, not those of first detection."""

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


def test_final_report_counts_every_cycle_of_the_run(tmp_path, monkeypatch, capsys):
    script = tmp_path / "train.py"
    script.write_text(NEVER_STEPS.format(epochs=9, late_step="pass"))
    monkeypatch.chdir(tmp_path)
    assert main_in_process("run", "--report", "out.json", "train.py") == 0
    printed = [line for line in capsys.readouterr().err.splitlines() if "TG303" in line][0]
    # printed when first seen, after two cycles ...
    assert "2 backward calls filled the gradients of SGD's parameters" in printed
    assert "cleared them 2 times" in printed
    # ... and the report written at exit has the final counts: 9 backward, 8 zero_grad after one
    (finding,) = json.loads((tmp_path / "out.json").read_text())["findings"]
    assert finding["code"] == "TG303" and finding["count"] == 1
    assert finding["message"].startswith(
        "9 backward calls filled the gradients of SGD's parameters (shapes (1, 3), (1,)) and "
        "zero_grad() cleared them 8 times, and SGD.step() was never called")


def test_an_optimizer_that_steps_late_is_reported_with_the_cycles_it_lost(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(NEVER_STEPS.format(epochs=8, late_step="if epoch >= 4: optimizer.step()"))
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    message = _tg303(watcher).message
    assert message.startswith("4 backward calls filled the gradients of SGD's parameters")
    assert "cleared them 4 times, before SGD.step() was first called" in message


def test_the_case_script_reports_its_four_epochs():
    watcher, status, stderr = run_in_process(CASES / "tg303_step_forgotten" / "buggy.py")
    assert status == 0, stderr
    assert _tg303(watcher).message.startswith("4 backward calls filled the gradients of Adam's")
    assert "cleared them 3 times, and Adam.step() was never called" in _tg303(watcher).message
