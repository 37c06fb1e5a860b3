"""`trainguard predict`: a folder run's validation accuracy reproduced from predictions.csv,
classes named by folder, CSV inputs, and bad input (exit 2, nothing written)."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from imagefiles import write_csv, write_digits
from trainguard.ckpt.checkpoint import load_checkpoint
from trainguard.cli import main
from trainguard.data.dataset import channel_stats
from trainguard.data.images import ImageSpec, read_folder_dataset

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _named_digits(root, **kwargs):
    """Digits PNGs under root/<english name>/: sorted names are not the digits' order."""
    write_digits(root, **kwargs)
    for digit, name in enumerate(NAMES):
        (root / str(digit)).rename(root / name)


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("predict")
    _named_digits(base / "train", per_class=10)
    _named_digits(base / "val", per_class=4, offset=10)
    run = base / "run"
    assert main(["train", "--data", "folder", "--root", str(base / "train"), "--val-root",
                 str(base / "val"), "--model", "mlp", "--epochs", "3", "--lr", "0.01",
                 "--batch-size", "16", "--run-dir", str(run), "--progress", "none"]) == 0
    return base, run


def _read(path):
    return list(csv.DictReader(path.open()))


def test_predict_reproduces_best_pts_validation_accuracy_and_names_classes_by_folder(
        folder_run, tmp_path):
    base, run = folder_run
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(run), str(base / "val"), "--output", str(out),
                 "--progress", "none"]) == 0
    rows = _read(out)
    assert list(rows[0]) == ["path", "class_index", "class_name", "probability"]
    assert len(rows) == 40
    summary = json.loads((run / "summary.json").read_text())
    classes = sorted(NAMES)
    assert summary["data"]["classes"] == classes
    assert all(classes[int(r["class_index"])] == r["class_name"] for r in rows)
    assert all(0.1 <= float(r["probability"]) <= 1.0 for r in rows)  # the largest of 10
    best = load_checkpoint(run / "best.pt")
    expected = best["history"][best["best"]["epoch"] - 1]["val_accuracy"]
    correct = sum(r["class_name"] == r["path"].split("/")[-2] for r in rows)
    assert correct / len(rows) == expected  # the same number, not just close
    assert 0.2 < expected < 1.0  # a test that could fail: some right, some wrong


def test_the_run_stores_classes_and_normalization(folder_run):
    base, run = folder_run
    train = read_folder_dataset(base / "train", ImageSpec())
    stats = channel_stats(train.images, train.scale)
    for where in (load_checkpoint(run / "best.pt")["data"],
                  json.loads((run / "summary.json").read_text())["data"]):
        assert where["classes"] == sorted(NAMES) and where["input_shape"] == [1, 8, 8]
        assert where["normalization"]["mean"] == pytest.approx(stats.mean.tolist())
        assert where["normalization"]["std"] == pytest.approx(stats.std.tolist())


def test_a_csv_of_paths_gives_the_same_predictions_as_the_files(folder_run, tmp_path):
    base, run = folder_run
    files = sorted((base / "val").rglob("*.png"))[:7]
    listing = write_csv(tmp_path / "list.csv",
                        [(str(p.relative_to(base)), 0) for p in files], header="image,label")
    by_csv, by_file = tmp_path / "a.csv", tmp_path / "b.csv"
    assert main(["predict", str(run), str(listing), "--root", str(base), "--output",
                 str(by_csv), "--checkpoint", "last", "--progress", "none"]) == 0
    assert main(["predict", str(run), *map(str, files), "--output", str(by_file),
                 "--checkpoint", str(run / "last.pt"), "--batch-size", "3",
                 "--progress", "none"]) == 0
    strip = [{k: v for k, v in r.items() if k != "path"} for r in _read(by_csv)]
    assert strip == [{k: v for k, v in r.items() if k != "path"} for r in _read(by_file)]
    assert [r["path"] for r in _read(by_file)] == [str(p) for p in files]


def _bad_inputs(base, tmp):
    (tmp / "notes.txt").write_text("not an image")
    (tmp / "empty").mkdir()
    big = tmp / "big.png"
    from PIL import Image

    Image.new("L", (16, 16)).save(big)
    no_column = write_csv(tmp / "nocol.csv", [("a.png", 0)], header="picture,label")
    bad_row = write_csv(tmp / "badrow.csv", [("val/zero/nothere.png", 0)])
    return [
        (["{run}", "{tmp}/missing.png"], "missing.png: no such file or folder"),
        (["{run}", "{tmp}/notes.txt"], "cannot read image"),
        (["{run}", "{tmp}/empty"], "the folder holds no images"),
        (["{run}", str(big)], "big.png: image is 16x16 (WxH) but the model was trained on 8x8"),
        (["{run}", str(no_column)], "nocol.csv: no image path column"),
        (["{run}", str(bad_row), "--root", str(base)], "badrow.csv line 2: image not found"),
        (["{tmp}/norun", "{tmp}/big.png"], "run directory not found"),
        (["{run}", str(big), "--checkpoint", "{tmp}/x.pt"], "checkpoint not found"),
        (["{run}", str(big), "--batch-size", "0"], "--batch-size: must be > 0"),
        (["{run}", str(big), "--device", "tpu:3"], "--device 'tpu:3' is not a device"),
    ]


def test_bad_input_exits_2_naming_the_file_and_writes_nothing(folder_run, tmp_path, capsys):
    base, run = folder_run
    for args, needle in _bad_inputs(base, tmp_path):
        out = tmp_path / "out.csv"
        argv = [a.format(run=run, tmp=tmp_path) for a in args]
        code = main(["predict", *argv, "--output", str(out), "--progress", "none"])
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert needle in err and "Traceback" not in err, (needle, err)
        assert not out.exists()


def test_a_run_of_ones_own_model_is_refused_with_what_to_do(tmp_path, capsys):
    import trainguard
    from torch import nn

    model = nn.Linear(4, 2)
    trainguard.fit(model, [(torch.randn(4, 4), torch.tensor([0, 1, 0, 1]))], None,
                   torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                   device="cpu", run_dir=tmp_path / "run", progress="none", plot=False)
    (tmp_path / "x.png").write_bytes(b"")
    code = main(["predict", str(tmp_path / "run"), str(tmp_path / "x.png"), "--checkpoint",
                 "last"])
    assert code == 2 and "was not written by `trainguard train`" in capsys.readouterr().err
