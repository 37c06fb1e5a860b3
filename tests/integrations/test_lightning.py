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


def test_a_fit_calls_only_the_hooks_the_callback_uses(tmp_path) -> None:
    """Lightning calls every hook of a callback, each inside a profiler context, unless it is not
    callable: the hooks TrainguardCallback does not implement are None on it, so a fit runs only
    its own (the profiler records each hook it calls); a subclass's hook is still called."""
    import io

    import lightning as L
    import torch
    from lightning.pytorch.profilers import SimpleProfiler

    from trainguard.integrations.lightning import TrainguardCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Counting(TrainguardCallback):
        batches = 0

        def on_train_batch_end(self, *args, **kwargs):
            super().on_train_batch_end(*args, **kwargs)
            self.batches += 1

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
    for cls, expected in ((TrainguardCallback, set()), (Counting, {"on_train_batch_end"})):
        profiler = SimpleProfiler()
        callback = cls(stream=io.StringIO())
        trainer = L.Trainer(max_epochs=1, callbacks=[callback], profiler=profiler, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, default_root_dir=tmp_path)
        trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
        prefix = f"[Callback]{cls.__qualname__}."
        called = {k[len(prefix):] for k in profiler.recorded_durations if k.startswith(prefix)}
        assert called == {"setup", "on_train_start", "teardown"} | expected
    assert callback.batches == 2
