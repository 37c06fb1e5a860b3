"""The run directory across processes: resume from another working directory, a finished run
left alone, the epoch's elapsed_s across a resume, another run's data refused."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader, TensorDataset

from cliutil import cli_env, run_cli
from imagefiles import write_digits
from test_cli_interrupt import SITECUSTOMIZE
from trainguard.ckpt.checkpoint import load_checkpoint
from trainguard.cli import main
from trainguard.loop.fit import TrainingInterrupted, fit


def _snapshot(folder):
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()
            if p.is_file()}


@pytest.mark.slow
def test_resume_works_from_another_working_directory(tmp_path):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    write_digits(here / "train", per_class=8)
    write_digits(here / "val", per_class=3, offset=8)
    elsewhere.mkdir()
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    args = ["train", "--data", "folder", "--root", "train", "--val-root", "val", "--model",
            "mlp", "--epochs", "3", "--batch-size", "16", "--progress", "none"]
    assert run_cli(*args, "--run-dir", "ref", cwd=here).returncode == 0
    env = cli_env(TG_TEST_SIGTERM_AT_STEP="7")  # 5 steps per epoch: mid-epoch 2
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), env["PYTHONPATH"]])
    stopped = run_cli(*args, "--run-dir", "run", cwd=here, env=env)
    assert stopped.returncode == 143, stopped.stderr
    config = load_checkpoint(here / "run" / "last.pt")["config"]["cli"]
    assert config["root"] == str((here / "train").resolve())  # stored resolved
    resumed = run_cli("train", "--resume", "../here/run", cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((here / "run" / "summary.json").read_text())
    reference = json.loads((here / "ref" / "summary.json").read_text())
    assert summary["weights_sha256"] == reference["weights_sha256"]


def test_resuming_a_finished_run_says_so_and_changes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--model", "mlp", "--epochs", "1", "--run-dir", str(run),
                 "--progress", "none"]) == 0
    before = _snapshot(run)
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"{run} is complete (1 of 1 epochs), step 45; nothing to do" in err
    assert _snapshot(run) == before


STOP_ONCE = """
class StopOnce:
    \"\"\"Fails at the start of epoch 2 the first time: the run is left after epoch 1.\"\"\"

    def on_epoch_start(self, state):
        flag = state.run_dir / "stopped-once"
        if state.epoch == 1 and not flag.exists():
            flag.write_text("")
            raise RuntimeError("stop once")
"""


def test_another_runs_data_is_refused_unless_forced(tmp_path, capsys):
    write_digits(tmp_path / "img", per_class=6)
    (tmp_path / "cb.py").write_text(STOP_ONCE)
    run = tmp_path / "run"
    assert main(["train", "--data", "folder", "--root", str(tmp_path / "img"), "--model", "mlp",
                 "--epochs", "2", "--progress", "none", "--run-dir", str(run),
                 "--callback", f"{tmp_path / 'cb.py'}:StopOnce"]) == 2
    write_digits(tmp_path / "img", per_class=7)  # one more image per class: other data
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert "the run's configuration changed" in err and "data_signature: checkpoint" in err
    assert "'n': 48" in err and "'n': 56" in err and "--force" in err
    assert main(["train", "--resume", str(run), "--force"]) == 0
    assert json.loads((run / "summary.json").read_text())["config"]["data_signature"]["n"] == 56


def test_elapsed_s_after_a_resume_counts_the_whole_epoch(tmp_path):
    def run(resume=None, stop_at=None):
        torch.manual_seed(0)
        model = nn.Linear(6, 3)
        model.register_forward_pre_hook(lambda *a: time.sleep(0.1))
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(48, 6, generator=g), torch.randint(0, 3, (48,),
                                                                            generator=g))
        return fit(model, DataLoader(data, batch_size=8), None,
                   torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                   device="cpu", run_dir=tmp_path, progress="none", plot=False,
                   handle_signals=True, resume=resume)

    def stop(optimizer, args, kwargs, count=[0]):
        count[0] += 1
        if count[0] == 4:
            os.kill(os.getpid(), signal.SIGTERM)
    handle = register_optimizer_step_post_hook(stop)
    try:
        with pytest.raises(TrainingInterrupted):
            run()
    finally:
        handle.remove()
    assert load_checkpoint(tmp_path / "last.pt")["epoch_elapsed_s"] >= 0.4  # 4 steps of 0.1 s
    history = run(resume=tmp_path)
    assert history.rows[0]["elapsed_s"] >= 0.6  # all 6 steps, not the 2 after the resume
