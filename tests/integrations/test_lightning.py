"""TrainguardCallback in real Lightning fits: silent on a correct fit and on resuming from
Lightning's own checkpoint; each fault written in a LightningModule hook reported at its line."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("lightning", reason="needs the `integrations` extra: pip install "
                                        "'trainguard[dev]' (lightning)")

from integration_helpers import SCRIPTS, cause_line, findings, run_script, where  # noqa: E402

SCRIPT = SCRIPTS / "lightning_app.py"
# fault -> the code reported at its `# cause:` line (scripts/lightning_app.py)
FAULTS = {"graph-kept": "TG201", "train-in-eval-hook": "TG101", "scheduler-per-batch": "TG305",
          "param-after-optimizers": "TG304"}


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """One process: the correct fit (and its resume), then one fit per fault."""
    out = tmp_path_factory.mktemp("lightning")
    r = run_script(SCRIPT, "correct", *FAULTS, "--epochs", "2", "--root", str(out),
                   "--report-dir", str(out), cwd=out)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r


def test_correct_fit_and_its_resume_have_no_findings(fits) -> None:
    out, r = fits
    assert findings(out, "correct") == []
    # the fit that saved Lightning's checkpoints (TG504 judges what they hold) and the fit that
    # resumed from last.ckpt (Lightning's own torch.load, not the user's: no TG701)
    assert r.stderr.count("trainguard: no findings") == 2, r.stderr[-4000:]


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_in_a_hook_is_reported_at_its_line(fits, fault: str) -> None:
    out, _ = fits
    assert where(findings(out, fault)) == [(FAULTS[fault], SCRIPT.name,
                                            cause_line(SCRIPT, fault))]


def test_loggers_get_the_counts(fits) -> None:
    out, _ = fits
    rows = list(csv.DictReader((out / "graph-kept" / "lightning_logs" / "version_0" /
                                "metrics.csv").open()))
    counts = [row["trainguard/TG201"] for row in rows if row.get("trainguard/TG201")]
    assert counts and float(counts[-1]) >= 1
    assert float([row["trainguard/findings"] for row in rows
                  if row.get("trainguard/findings")][-1]) == 1


def test_unseeded_fit_fails_under_strict(tmp_path) -> None:
    r = run_script(SCRIPT, "unseeded", "--strict", "--epochs", "1", "--root", str(tmp_path),
                   "--report-dir", str(tmp_path), cwd=tmp_path)
    assert where(findings(tmp_path, "unseeded")) == [("TG501", SCRIPT.name,
                                                      cause_line(SCRIPT, "unseeded"))]
    assert r.returncode == 1
    assert "FindingsError: trainguard: 1 finding in a fit watched with strict=True" in r.stderr
