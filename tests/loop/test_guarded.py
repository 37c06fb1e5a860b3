"""The reference loop under the sanitizer: no findings, and the same weights as without it."""

from __future__ import annotations

import io

import torch

import trainguard
from trainguard.data.build import DataConfig, build_datasets
from trainguard.data.loaders import make_loader
from trainguard.models import build_model


def _train(tmp_path, name, *, watched: bool):
    train, val = build_datasets(DataConfig(seed=0))
    torch.manual_seed(0)
    model = build_model("cnn", input_shape=train.input_shape, num_classes=10)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    kwargs = dict(epochs=2, device="cpu", seed=0, run_dir=tmp_path / name, progress="none",
                  accumulate_grad_batches=2, clip_grad_norm=1.0, plot=False,
                  scheduler=torch.optim.lr_scheduler.OneCycleLR(opt, 0.01, total_steps=46),
                  scheduler_interval="step")
    loaders = (make_loader(train, batch_size=32, train=True, seed=0),
               make_loader(val, batch_size=256, train=False, seed=0))
    if not watched:
        return trainguard.fit(model, *loaders, opt, torch.nn.CrossEntropyLoss(), **kwargs), None
    with trainguard.watch(stream=io.StringIO()) as watcher:
        history = trainguard.fit(model, *loaders, opt, torch.nn.CrossEntropyLoss(), **kwargs)
        findings = list(watcher.findings)
    return history, findings


def test_fit_yields_no_findings_and_the_same_weights(tmp_path):
    plain, _ = _train(tmp_path, "plain", watched=False)
    guarded, findings = _train(tmp_path, "guarded", watched=True)
    assert findings == []
    assert guarded.weights_sha256 == plain.weights_sha256
    assert guarded.rows[-1]["val_accuracy"] == plain.rows[-1]["val_accuracy"]
