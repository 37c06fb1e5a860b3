"""`trainguard train` stopped by SIGTERM or killed by SIGKILL, then `--resume`d."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cliutil import cli_env, run_cli
from trainguard.ckpt.checkpoint import find_resume_checkpoint
from trainguard.ckpt.io import verify_checkpoint
from trainguard.cli import main

# Sends SIGTERM to the training process right after its N-th optimizer step (a real signal,
# delivered at a chosen step): loaded through sitecustomize, so trainguard's code is unchanged.
SITECUSTOMIZE = '''
import os
_at = int(os.environ.get("TG_TEST_SIGTERM_AT_STEP", "0"))
if _at:
    import signal
    import torch.optim.optimizer as _opt
    _count = [0]
    def _hook(optimizer, args, kwargs):
        _count[0] += 1
        if _count[0] == _at:
            os.kill(os.getpid(), signal.SIGTERM)
    _opt.register_optimizer_step_post_hook(_hook)
'''

ARGS = ["--epochs", "2", "--progress", "none"]


def _sha(run_dir: Path) -> str:
    return json.loads((run_dir / "summary.json").read_text())["weights_sha256"]


@pytest.fixture(scope="module")
def hook_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("site")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env["PYTHONPATH"]])
    return env


@pytest.mark.slow
@pytest.mark.parametrize("workers,stops", [("0", [10, 45, 61]), ("2", [23])])
def test_sigterm_exits_143_and_resume_matches_the_uninterrupted_run(tmp_path, hook_env,
                                                                     workers, stops):
    ref = tmp_path / "ref"
    proc = run_cli("train", *ARGS, "--num-workers", workers, "--run-dir", str(ref))
    assert proc.returncode == 0, proc.stderr
    for stop in stops:  # 45 batches per epoch: 45 ends epoch 1, the others are mid-epoch
        run = tmp_path / f"stop{stop}"
        env = dict(hook_env, TG_TEST_SIGTERM_AT_STEP=str(stop))
        proc = run_cli("train", *ARGS, "--num-workers", workers, "--run-dir", str(run), env=env)
        assert proc.returncode == 143, proc.stderr
        assert f"trainguard train --resume {run}" in proc.stderr
        assert not (run / "summary.json").exists()
        resumed = run_cli("train", "--resume", str(run), "--num-workers", workers)
        assert resumed.returncode == 0, resumed.stderr
        assert "resumed from" in resumed.stderr
        assert _sha(run) == _sha(ref), f"stopped at step {stop}"


# The three tests below judge what --resume does, not the process around it: they call the CLI's
# main in this process (the real process's exit status: test_train_cli.py and the slow tests here).
def _train(capsys, *args: str) -> tuple[int, str]:
    """``trainguard train ARGS`` in this process: (exit status, what it wrote to stderr)."""
    code = main(["train", *args])
    return code, capsys.readouterr().err


def test_resume_with_changed_settings_is_refused_unless_forced(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(capsys, "--epochs", "1", "--model", "mlp", "--run-dir", str(run),
                  "--progress", "none")[0] == 0
    code, err = _train(capsys, "--resume", str(run), "--batch-size", "64")
    assert code == 2
    assert "--batch-size: run has 32, given 64" in err and "--force" in err
    code, err = _train(capsys, "--resume", str(run), "--batch-size", "64", "--force",
                       "--epochs", "2", "--progress", "none")
    assert code == 0, err
    assert json.loads((run / "summary.json").read_text())["epochs"] == 2


def test_damaged_last_checkpoint_falls_back_and_says_so(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(capsys, "--epochs", "2", "--model", "mlp", "--run-dir", str(run),
                  "--keep-last", "2", "--checkpoint-every-steps", "20",
                  "--progress", "none")[0] == 0
    sha = _sha(run)
    last = run / "last.pt"
    (run / "best.pt").unlink()
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit in the middle of the tensor data
    last.write_bytes(bytes(data))
    code, err = _train(capsys, "--resume", str(run), "--progress", "none")
    assert code == 0, err
    assert "skipped a damaged checkpoint" in err and "CRC-32" in err
    assert "resuming from" in err and "step-000000080.pt" in err
    assert _sha(run) == sha  # resumed from step 80 of 90 and trained the rest identically


def test_truncated_checkpoint_is_detected(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(capsys, "--epochs", "1", "--model", "mlp", "--run-dir", str(run),
                  "--progress", "none")[0] == 0
    for name in ("last.pt", "best.pt"):
        p = run / name
        p.write_bytes(p.read_bytes()[:-100])
    code, err = _train(capsys, "--resume", str(run))
    assert code == 2
    assert "no usable checkpoint" in err and "truncated" in err


def _last_logged_step(log: Path) -> int:
    steps = re.findall(r"checkpoint \S+ \(\w+\) epoch=\d+ step=(\d+)", log.read_text())
    return int(steps[-1]) if steps else -1


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_a_completed_checkpoint(tmp_path):
    # long enough (30 epochs x 45 steps, a checkpoint every step) that 20 short-lived
    # processes cannot finish it, however fast the machine
    plain = ["--epochs", "30", "--model", "mlp", "--progress", "none"]
    # the uninterrupted run to compare with trains meanwhile, without a checkpoint every step
    # (writing checkpoints must not change the numerics either)
    ref = tmp_path / "ref"
    with open(tmp_path / "ref.err", "w") as err:
        reference = subprocess.Popen(
            [sys.executable, "-m", "trainguard", "train", *plain, "--run-dir", str(ref)],
            env=cli_env(), stdout=subprocess.DEVNULL, stderr=err)
    try:
        run = tmp_path / "run"
        _kill_at_random_moments_then_resume(
            run, [*plain, "--checkpoint-every-steps", "1", "--keep-last", "2"])
        reference.wait(timeout=600)
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()
    assert reference.returncode == 0, (tmp_path / "ref.err").read_text()
    assert _sha(run) == _sha(ref)


def _kill_at_random_moments_then_resume(run: Path, flags: list[str]) -> None:
    """20 processes SIGKILLed at random moments (at least 3 while writing a checkpoint), each
    resuming the last; every moment leaves whole checkpoints; a last resume trains to the end."""
    rng = random.Random(1234)
    kills, during_write = 0, 0
    cmd = [sys.executable, "-m", "trainguard", "train", *flags, "--run-dir", str(run)]
    while kills < 20:
        proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        log = run / "train.log"
        deadline = time.monotonic() + 120
        start_lines = log.read_text().count(" start ") if log.exists() else 0
        while (not log.exists() or log.read_text().count(" start ") == start_lines) \
                and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if kills % 2:  # aim at a checkpoint write: kill as soon as a temporary file appears
            until = time.monotonic() + rng.uniform(0.0, 0.25)
            while proc.poll() is None and time.monotonic() < until + 2:
                if time.monotonic() > until and any(run.glob(".*.tmp-*")):
                    break
        else:
            time.sleep(rng.uniform(0.0, 0.25))
        writing = any(run.glob(".*.tmp-*"))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.returncode == 0:
            break  # finished before the kill landed
        kills += 1
        during_write += writing
        completed = _last_logged_step(log)
        visible = [p for p in run.glob("*.pt")]
        for p in visible:
            verify_checkpoint(p)  # no half-written checkpoint ever carries a real name
        if completed >= 0:
            _, ckpt, problems = find_resume_checkpoint(run)
            assert not problems
            assert ckpt["step"] >= completed
        cmd = [sys.executable, "-m", "trainguard", "train", "--resume", str(run)]
    assert kills == 20, f"only {kills} kills landed before training finished"
    assert during_write >= 3, f"only {during_write} kills landed during a checkpoint write"
    final = run_cli("train", "--resume", str(run))
    assert final.returncode == 0, final.stderr
    assert not list(run.glob(".*.tmp-*"))
