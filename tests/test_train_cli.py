"""`trainguard train` end to end: run directory, reproducibility, and bad input (exit 2)."""

from __future__ import annotations

import csv
import json

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


@pytest.mark.parametrize("args", [["--epochs", "0"], ["--batch-size", "x"], ["--channels", "2"],
                                  ["--image-size", "0"], ["--data", "parquet"]])
def test_bad_flags_exit_2(args, capsys):
    assert main(["train", *args]) == 2
    assert "error" in capsys.readouterr().err


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
