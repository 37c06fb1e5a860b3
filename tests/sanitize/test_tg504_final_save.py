"""TG504 on a checkpoint with the optimizer but not a live scheduler: a resume point while
training goes on after it, the result of training when it is saved after the run's last step
(an SWA run's final save, modelled on mosaicml/composer#624's update_bn workflow)."""

from __future__ import annotations

import io

import torch
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg504_incomplete_checkpoint import IncompleteCheckpoint


def _train(save_every_epoch: bool) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)
    for epoch in range(3):
        for _ in range(2):
            optimizer.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
        scheduler.step()
        if save_every_epoch:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch}, io.BytesIO())
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3},
               io.BytesIO())


def test_a_save_after_the_last_step_is_not_a_resume_point():
    assert findings_of(lambda: _train(save_every_epoch=False), IncompleteCheckpoint) == []


def test_a_save_that_training_goes_on_after_leaves_out_the_scheduler():
    [finding] = findings_of(lambda: _train(save_every_epoch=True), IncompleteCheckpoint)
    assert "leaves out the live CosineAnnealingLR" in finding.message, finding.message
