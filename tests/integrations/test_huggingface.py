"""TrainguardCallback in real Hugging Face Trainer runs (a BERT built from a config with random
weights, no download, evaluated each epoch): silent on a correct run and on resuming from the
Trainer's own checkpoint; each fault written in the Trainer's hooks reported at its line."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="needs the `integrations` extra: pip install "
                                           "'trainguard[dev]' (transformers)")
pytest.importorskip("accelerate", reason="the Trainer needs accelerate: pip install "
                                         "'trainguard[dev]'")

from integration_helpers import SCRIPTS, cause_line, findings, run_script, where  # noqa: E402

SCRIPT = SCRIPTS / "hf_app.py"
# fault -> the code reported at its `# cause:` line (scripts/hf_app.py)
FAULTS = {"graph-kept": "TG201", "train-in-eval-hook": "TG101", "scheduler-per-batch": "TG305",
          "param-after-optimizer": "TG304", "unseeded": "TG501"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One process: the correct run (and its resume), then one run per fault."""
    out = tmp_path_factory.mktemp("hf")
    r = run_script(SCRIPT, "correct", *FAULTS, "--root", str(out), "--report-dir", str(out),
                   cwd=out)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r


def test_correct_run_and_its_resume_have_no_findings(runs) -> None:
    out, r = runs
    assert findings(out, "correct") == []
    assert r.stderr.count("trainguard: no findings") == 2, r.stderr[-4000:]


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_in_a_hook_is_reported_at_its_line(runs, fault: str) -> None:
    out, _ = runs
    assert where(findings(out, fault)) == [(FAULTS[fault], SCRIPT.name,
                                            cause_line(SCRIPT, fault))]


def test_counts_reach_trainer_log(runs) -> None:
    _, r = runs
    # Trainer.log prints each log (report_to="none"); every report_to integration gets the same.
    # One log per run: the correct run's two, then one per fault.
    logs = [line for line in r.stdout.splitlines() if "'trainguard/findings'" in line]
    assert len(logs) == 2 + len(FAULTS), r.stdout[-3000:]
    assert "'trainguard/findings': '0'" in logs[0]
    assert "'trainguard/findings': '1'" in logs[2] and "'trainguard/TG201'" in logs[2]


@pytest.mark.slow
def test_strict_fails_the_training(tmp_path) -> None:
    r = run_script(SCRIPT, "graph-kept", "--strict", "--epochs", "1", "--root", str(tmp_path),
                   cwd=tmp_path)
    assert r.returncode == 1
    assert "FindingsError: trainguard: 1 finding in a fit watched with strict=True" in r.stderr
