"""TG504 on weights saved alone in numbered files (``00005.pt``, an epoch's number and nothing
else) and on an optimizer wrapper's state (k2-fsa/snowfall#110: the Noam optimizer's state was
never saved, so a run restarted from an intermediate epoch began its warm-up again). Loaded back
into a model that a fresh optimizer then trains, the file was a resume point without the
optimizer; reloaded into the model an optimizer with state in memory keeps training (the best
epoch's weights restored), it is not."""

from __future__ import annotations

import os

import torch
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg504_incomplete_checkpoint import IncompleteCheckpoint


class _Noam:
    """A warm-up schedule that owns its optimizer, as the Transformer's NoamOpt does."""

    def __init__(self, optimizer):
        self.optimizer, self.step_count = optimizer, 0

    def step(self):
        self.step_count += 1
        for group in self.optimizer.param_groups:
            group["lr"] = 1e-2 * min(1.0, self.step_count / 4)
        self.optimizer.step()

    def state_dict(self):
        return {"step_count": self.step_count, "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state):
        self.step_count = state["step_count"]
        self.optimizer.load_state_dict(state["optimizer"])


def _epoch(model, noam):
    for _ in range(2):
        noam.optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        noam.step()


def _run(folder, *, whole: bool, restart: bool) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    noam = _Noam(torch.optim.Adam(model.parameters()))
    for epoch in range(3):
        _epoch(model, noam)
        path = os.path.join(folder, f"{epoch:05d}.pt")
        torch.save({"model": model.state_dict(), "noam": noam.state_dict(), "epoch": epoch}
                   if whole else model.state_dict(), path)
    if restart:  # the job restarted: a new model and optimizer, then the last file
        model = nn.Linear(4, 2)
        noam = _Noam(torch.optim.Adam(model.parameters()))
    state = torch.load(path)
    if restart and whole:
        noam.load_state_dict(state["noam"])
    model.load_state_dict(state["model"] if whole else state)
    _epoch(model, noam)


def test_numbered_weights_trained_on_by_a_fresh_optimizer_were_a_resume_point(tmp_path):
    [finding] = findings_of(lambda: _run(tmp_path, whole=False, restart=True),
                            IncompleteCheckpoint)
    assert "loaded back from '00002.pt' and trained on" in finding.message, finding.message


def test_the_best_weights_reloaded_into_the_optimizer_still_training_are_no_resume(tmp_path):
    assert findings_of(lambda: _run(tmp_path, whole=False, restart=False),
                       IncompleteCheckpoint) == []


def test_an_optimizer_wrapper_state_holds_the_optimizer(tmp_path):
    assert findings_of(lambda: _run(tmp_path, whole=True, restart=True),
                       IncompleteCheckpoint) == []
