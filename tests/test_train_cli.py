"""`trainguard train` end to end: run directory, reproducibility, and bad input (exit 2)."""

from __future__ import annotations

import csv
import json
import re

import pytest

from cliutil import run_cli
from trainguard.cli import main
from imagefiles import write_csv, write_digits


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run") / "digits"
    proc = run_cli("train", "--epochs", "3", "--run-dir", str(run_dir), "--progress", "plain")
    assert proc.returncode == 0, proc.stderr
    return run_dir, proc


def test_run_directory_holds_every_file(digits_run):
    run_dir, proc = digits_run
    names = {p.name for p in run_dir.iterdir()}
    assert {"metrics.csv", "summary.json", "curves.png", "train.log", "last.pt",
            "best.pt"} <= names
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"]
    assert list(rows[0])[:5] == ["epoch", "train_loss", "val_loss", "val_accuracy", "lr"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 3 and summary["seed"] == 0
    assert len(summary["weights_sha256"]) == 64
    assert summary["best_val_accuracy"] == max(float(r["val_accuracy"]) for r in rows)
    assert (run_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "epoch 3/3" in proc.stderr and summary["weights_sha256"] in proc.stdout


def test_three_epochs_on_digits_already_generalize(digits_run):
    summary = json.loads((digits_run[0] / "summary.json").read_text())
    assert summary["best_val_accuracy"] >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_two_seeded_runs_give_identical_weights(tmp_path, workers):
    shas = []
    for name in ("a", "b"):
        proc = run_cli("train", "--epochs", "1", "--seed", "7", "--num-workers", workers,
                       "--run-dir", str(tmp_path / name), "--progress", "none")
        assert proc.returncode == 0, proc.stderr
        shas.append(json.loads((tmp_path / name / "summary.json").read_text())["weights_sha256"])
    assert shas[0] == shas[1]
    if workers != "0":
        return
    other = run_cli("train", "--epochs", "1", "--seed", "8", "--num-workers", workers,
                    "--run-dir", str(tmp_path / "c"), "--progress", "none")
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["weights_sha256"] != shas[0]
    assert other.returncode == 0


def test_csv_and_folder_data_train(tmp_path, capsys):
    root = tmp_path / "img"
    rows = write_digits(root, per_class=8)
    csv_path = write_csv(tmp_path / "train.csv", rows)
    for args in (["--data", "csv", "--csv", str(csv_path), "--root", str(root)],
                 ["--data", "folder", "--root", str(root), "--channels", "3",
                  "--image-size", "16"]):
        out = tmp_path / args[1]
        assert main(["train", *args, "--epochs", "1", "--run-dir", str(out),
                     "--progress", "none"]) == 0
        assert json.loads((out / "summary.json").read_text())["config"]["data_signature"]["n"] \
            == 64


@pytest.mark.parametrize("make,needle", [
    (lambda t, r: ["--data", "csv", "--csv", str(t / "none.csv"), "--root", str(r)],
     "CSV file not found"),
    (lambda t, r: ["--data", "csv", "--csv", str(write_csv(t / "b.csv", [("0/x.png", 0)])),
                   "--root", str(r)], "b.csv line 2: image not found"),
    (lambda t, r: ["--data", "csv", "--csv",
                   str(write_csv(t / "c.csv", [("a.png", "cat")], header="image,label")),
                   "--root", str(r)], "c.csv line 2: label 'cat' is not an integer"),
    (lambda t, r: ["--data", "folder", "--root", str(t / "nothing")], "image folder not found"),
    (lambda t, r: ["--data", "csv"], "--data csv needs --csv FILE and --root DIR"),
    (lambda t, r: ["--val-fraction", "1.5"], "--val-fraction must be between 0 and 1"),
    (lambda t, r: ["--model", "resnet900"], "unknown model 'resnet900'"),
    (lambda t, r: ["--device", "cuda:7"] if not _cuda() else ["--device", "nonsense"],
     "--device"),
])
def test_bad_input_exits_2_before_training(tmp_path, capsys, make, needle):
    root = tmp_path / "img"
    write_digits(root, per_class=1)
    run_dir = tmp_path / "run"
    code = main(["train", *make(tmp_path, root), "--run-dir", str(run_dir), "--epochs", "1",
                 "--progress", "none"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert not (run_dir / "last.pt").exists()


def test_bad_input_exit_status_of_the_real_process(tmp_path):
    proc = run_cli("train", "--data", "csv", "--csv", str(tmp_path / "no.csv"), "--root",
                   str(tmp_path), "--progress", "none")
    assert proc.returncode == 2
    assert "trainguard train: error: CSV file not found" in proc.stderr


@pytest.mark.parametrize("args,named", [
    (["--epochs", "0"], "--epochs"), (["--batch-size", "x"], "--batch-size"),
    (["--channels", "2"], "--channels"), (["--image-size", "0"], "--image-size"),
    (["--data", "parquet"], "--data"), (["--lr", "0"], "--lr"), (["--lr", "fast"], "--lr"),
    (["--weight-decay", "-1"], "--weight-decay"), (["--accumulate", "0"], "--accumulate"),
    (["--clip-grad-norm", "-0.5"], "--clip-grad-norm"), (["--precision", "8"], "--precision"),
    (["--patience", "0"], "--patience"), (["--min-delta", "-0.1"], "--min-delta"),
    (["--log-every-steps", "-1"], "--log-every-steps"), (["--keep-last", "-2"], "--keep-last"),
    (["--mean", "a,b"], "--mean"), (["--monitor", "val_f1"], "--monitor"),
    (["--progress", "fancy"], "--progress"), (["--num-workers", "-1"], "--num-workers"),
    (["--checkpoint-every-steps", "0"], "--checkpoint-every-steps"),
    (["--seed", "1.5"], "--seed"), (["--scheduler", "step"], "--scheduler"),
])
def test_bad_flags_exit_2_naming_the_flag(args, named, capsys):
    assert main(["train", *args]) == 2
    assert f"argument {named}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "predict"])
def test_help_shows_each_default_once_and_every_flag_has_help(command, capsys):
    import argparse

    from trainguard.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    for action in parser._actions:
        assert action.help and action.help != argparse.SUPPRESS, action.option_strings
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    blocks = re.split(r"\n(?=  -)", text)  # one block per flag
    assert len(blocks) > (20 if command == "train" else 6)
    for block in blocks:
        assert block.count("default") <= 1, block


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


CALLBACKS = '''
import json
from trainguard import Callback


class LogToList(Callback):
    """Logs every step's loss and every epoch's row to a list, written out at the end."""

    def __init__(self):
        self.log = []

    def on_step_end(self, state, loss):
        self.log.append(["step", state.step, loss.item()])

    def on_epoch_end(self, state, row):
        self.log.append(["epoch", state.epoch, row])

    def on_fit_end(self, state):
        (state.run_dir / "log.json").write_text(json.dumps(self.log))


class Boom(Callback):
    def on_step_end(self, state, loss):
        if state.step == 50:
            raise RuntimeError("the callback broke")
'''

MLP = ["--model", "mlp", "--progress", "none"]


@pytest.mark.slow
def test_patience_stops_early_and_resume_trains_no_further(tmp_path, capsys):
    run = tmp_path / "run"
    # a learning rate too small to move the validation loss by --min-delta: no improvement
    # after epoch 1, so --patience 1 stops after epoch 2
    assert main(["train", *MLP, "--epochs", "8", "--lr", "1e-9", "--patience", "1",
                 "--min-delta", "0.01", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "stopped early at epoch 2: EarlyStopping: val_loss did not improve" in out
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["stopped_early"], summary["stopped_epoch"], summary["steps"]) == (True, 2, 90)
    assert len(list(csv.DictReader((run / "metrics.csv").open()))) == 2
    files = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert main(["train", "--resume", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"{run} is stopped at epoch 2 (EarlyStopping: val_loss" in err
    assert "nothing to do" in err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == files


@pytest.mark.slow
def test_a_callback_of_ones_own_logs_to_a_list(tmp_path, capsys):
    (tmp_path / "my_callbacks.py").write_text(CALLBACKS)
    run = tmp_path / "run"
    assert main(["train", *MLP, "--epochs", "2", "--run-dir", str(run),
                 "--callback", f"{tmp_path / 'my_callbacks.py'}:LogToList"]) == 0
    log = json.loads((run / "log.json").read_text())
    steps = [entry for entry in log if entry[0] == "step"]
    epochs = [entry[2] for entry in log if entry[0] == "epoch"]
    assert [s[1] for s in steps] == list(range(1, 91)) and all(s[2] > 0 for s in steps)
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [float(r["val_loss"]) for r in rows] == [e["val_loss"] for e in epochs]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["config"]["cli"]["callback"] == [f"{tmp_path / 'my_callbacks.py'}:LogToList"]


@pytest.mark.slow
def test_a_callback_that_raises_exits_2_naming_it_and_the_last_checkpoint_stays(tmp_path,
                                                                                 capsys):
    (tmp_path / "my_callbacks.py").write_text(CALLBACKS)
    run = tmp_path / "run"
    code = main(["train", *MLP, "--epochs", "2", "--run-dir", str(run),
                 "--callback", f"{tmp_path / 'my_callbacks.py'}:Boom"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "callback Boom.on_step_end raised RuntimeError: the callback broke" in err
    assert "raise RuntimeError" in err  # the callback's own traceback
    assert f"trainguard train --resume {run}" in err
    from trainguard.ckpt.checkpoint import load_checkpoint

    assert load_checkpoint(run / "last.pt")["step"] == 45  # epoch 1's checkpoint
    assert not (run / "summary.json").exists()


@pytest.mark.parametrize("spec,needle", [
    ("nothing_here", "expected MODULE:NAME or FILE.py:NAME"),
    ("{tmp}/missing.py:Cb", "file not found"),
    ("{tmp}/my_callbacks.py:Nope", "has no 'Nope' (it defines Boom, Callback, LogToList"),
    ("no_such_module_xyz:Cb", "cannot import module 'no_such_module_xyz'"),
])
def test_bad_callback_flags_exit_2_before_training(tmp_path, capsys, spec, needle):
    (tmp_path / "my_callbacks.py").write_text(CALLBACKS)
    code = main(["train", *MLP, "--run-dir", str(tmp_path / "run"), "--callback",
                 spec.format(tmp=tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "--callback" in err, err
    assert not (tmp_path / "run").exists()
