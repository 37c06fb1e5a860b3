"""TG305 on schedules of finite length (``CosineAnnealingLR``'s ``T_max``, ``PolynomialLR``'s and a
decaying ``LinearLR``'s ``total_iters``) given in epochs and stepped per batch (ivadomed/ivadomed#57,
konstmish/prodigy#4): the whole schedule runs in the first batches. Lengths in batches, per-epoch
stepping, warm-ups, warm restarts and OneCycle stay silent."""

from __future__ import annotations

import textwrap

import pytest

from sanitize_helpers import run_in_process

TEMPLATE = textwrap.dedent("""\
    import torch
    from torch import nn
    from torch.optim import lr_scheduler as lrs
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(48, 4), torch.randn(48, 1)), batch_size=8)
    EPOCHS = 4
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = {schedule}
    for epoch in range(EPOCHS):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            {per_batch}scheduler.step()
        {per_epoch}scheduler.step()
    """)
STEP_LINE = 17  # the per-batch scheduler.step()

PER_BATCH = [
    ("lrs.CosineAnnealingLR(optimizer, T_max=EPOCHS)",
     "CosineAnnealingLR(T_max=4) is a schedule of 4 steps stepped per batch: it stepped 6 times "
     "during epoch 2"),
    ("lrs.PolynomialLR(optimizer, total_iters=EPOCHS, power=2.0)",
     "PolynomialLR(total_iters=4) is a schedule of 4 steps stepped per batch"),
    ("lrs.LinearLR(optimizer, start_factor=1.0, end_factor=0.01, total_iters=EPOCHS)",
     "then the rate sits at its floor for the rest of training"),
]
SILENT = [
    "lrs.CosineAnnealingLR(optimizer, T_max=EPOCHS * len(loader))",
    "lrs.PolynomialLR(optimizer, total_iters=EPOCHS * len(loader))",
    "lrs.LinearLR(optimizer, start_factor=0.1, total_iters=3)",  # a warm-up holds its end value
    "lrs.CosineAnnealingWarmRestarts(optimizer, T_0=3)",
    "lrs.OneCycleLR(optimizer, max_lr=0.1, total_steps=EPOCHS * len(loader))",
]


def _run(tmp_path, schedule: str, per_batch: bool):
    script = tmp_path / "train.py"
    script.write_text(TEMPLATE.format(schedule=schedule, per_batch="" if per_batch else "# ",
                                      per_epoch="# " if per_batch else ""))
    watcher, status, stream = run_in_process(script)
    assert status == 0, stream
    return watcher.findings


@pytest.mark.parametrize("schedule, says", PER_BATCH)
def test_a_length_in_epochs_stepped_per_batch_is_reported_at_its_step(tmp_path, schedule, says):
    (finding,) = _run(tmp_path, schedule, per_batch=True)
    assert (finding.code, finding.line) == ("TG305", STEP_LINE)
    assert says in finding.message, finding.message
    assert "epochs * len(loader)" in finding.fix


@pytest.mark.parametrize("schedule", SILENT)
def test_a_length_in_batches_a_warm_up_or_a_restarting_schedule_is_silent(tmp_path, schedule):
    assert _run(tmp_path, schedule, per_batch=True) == []


@pytest.mark.parametrize("schedule", [s for s, _ in PER_BATCH])
def test_a_length_in_epochs_stepped_per_epoch_is_silent(tmp_path, schedule):
    assert _run(tmp_path, schedule, per_batch=False) == []
