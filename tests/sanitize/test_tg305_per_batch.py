"""TG305's two findings on one line: a per-epoch scheduler stepped per batch *and* before the first
optimizer step is one finding (same code, same line) whose message says both, counted once."""

from __future__ import annotations

import textwrap

from sanitize_helpers import run_in_process

SCRIPT = textwrap.dedent("""\
    import warnings

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    warnings.simplefilter("ignore", UserWarning)  # PyTorch's own order warning
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(320, 4), torch.randn(320, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            scheduler.step()
            optimizer.step()
    """)


def test_order_and_per_batch_on_one_line_make_one_finding_that_says_both(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    watcher, status, stream = run_in_process(script)
    assert status == 0
    (finding,) = watcher.findings
    assert (finding.code, finding.line, finding.count) == ("TG305", 17, 1)
    assert finding.message.startswith("StepLR.step() ran before the first SGD.step()")
    assert ". Also: StepLR(step_size=5, gamma=0.5) is a per-epoch schedule stepped per batch: it " \
           "stepped 40 times during epoch 1 (a pass over a DataLoader of 40 batches)" \
           in finding.message
    assert "every 5 epochs: the rate was cut 8 times in epoch 1" in finding.message
    assert "once per epoch, after the batch loop" in finding.fix
    assert stream.count("TG305") == 2  # shown when first seen, and again when amended


SHORT_EPOCHS = textwrap.dedent("""\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(80, 4), torch.randn(80, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    for epoch in range(16):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            scheduler.step()
    """)


def test_a_rate_about_to_collapse_keeps_the_steps_checked_so_a_short_run_is_reported(tmp_path):
    # Epochs of 10 batches are too short for two sampled steps in one pass, and the rate falls
    # below 1e-9 of its start at about step 150, after the last sampled step of this 160-step
    # run (one in 32 by then). The first pass, judged whole when it ends, shows the two cuts.
    script = tmp_path / "train.py"
    script.write_text(SHORT_EPOCHS)
    watcher, status, _ = run_in_process(script)
    assert status == 0
    (finding,) = watcher.findings
    assert (finding.code, finding.line) == ("TG305", 15)
    assert "it stepped 10 times during epoch 1 (a pass over a DataLoader of 10 batches)" \
        in finding.message


PLATEAU = textwrap.dedent("""\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(160, 4), torch.randn(160, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=PATIENCE, factor=0.5)


    def on_batch_end(loss):
        plateau.step(loss)


    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            on_batch_end(loss.item())
    """)


def test_a_plateau_stepped_per_batch_is_reported_at_its_step_with_the_cuts_of_the_epoch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PLATEAU.replace("PATIENCE", "2"))
    watcher, status, _ = run_in_process(script)
    assert status == 0
    (finding,) = watcher.findings
    assert (finding.code, finding.line) == ("TG305", 13)
    assert finding.message.startswith(
        "ReduceLROnPlateau(patience=2, cooldown=0, factor=0.5) is stepped per batch: it stepped "
        "20 times during epoch 1 (a pass over a DataLoader of 20 batches)")
    assert "the rate was cut" in finding.message and "in epoch 1 (from 0.01 to" in finding.message
    assert "once per epoch, after the batch loop" in finding.fix


def test_a_plateau_stepped_per_iteration_with_patience_in_iterations_is_silent(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PLATEAU.replace("PATIENCE", "2 * len(loader)"))
    watcher, status, _ = run_in_process(script)
    assert status == 0
    assert watcher.findings == []
