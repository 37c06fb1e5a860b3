"""fit on CUDA: autocast with GradScaler (fp16) and bf16, and seeded runs that agree."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainguard.ckpt.fingerprint import weights_sha256
from trainguard.loop.fit import fit

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _loaders():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 16, generator=g), torch.randint(0, 4, (256,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=32), DataLoader(TensorDataset(x, y),
                                                                      batch_size=64)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))


@pytest.mark.parametrize("precision", ["32", "bf16", "fp16"])
def test_trains_on_cuda(precision):
    model = _model()
    train, val = _loaders()
    h = fit(model, train, val, torch.optim.AdamW(model.parameters(), lr=1e-2),
            nn.CrossEntropyLoss(), epochs=3, device="cuda", precision=precision, seed=0,
            clip_grad_norm=1.0, progress="none")
    assert next(model.parameters()).device.type == "cuda"
    assert model[0].weight.dtype == torch.float32  # autocast keeps float32 master weights
    assert h.rows[-1]["train_loss"] < h.rows[0]["train_loss"]


def test_deterministic_cuda_runs_agree():
    shas = []
    for _ in range(2):
        model = _model()
        train, val = _loaders()
        fit(model, train, val, torch.optim.AdamW(model.parameters(), lr=1e-2),
            nn.CrossEntropyLoss(), epochs=2, device="cuda", seed=0, deterministic=True,
            progress="none")
        shas.append(weights_sha256(model))
    assert shas[0] == shas[1]
