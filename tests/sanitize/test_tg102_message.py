"""TG102 is reported at the ``eval()`` still in effect, naming the training code's call that ran
it, and a module put back in train mode is forgotten (pytorch/tutorials#1624: ``model.train()`` once before the epochs,
``model.eval()`` inside them)."""

from __future__ import annotations

import torch
from torch import nn

from sanitize_helpers import CASES, run_in_process
from trainguard.sanitize.watcher import Watcher


def _line(lines: list[str], text: str) -> int:
    return next(n for n, line in enumerate(lines, start=1) if text in line)


def test_a_train_run_once_before_the_epoch_loop_is_reported_at_the_loop_naming_it():
    script = CASES / "tg102_train_once_eval_inside" / "buggy.py"
    lines = script.read_text().splitlines()
    eval_line, loop_line = _line(lines, "net.eval()"), _line(lines, "for epoch in range(3):")
    forward_line = _line(lines, "F.cross_entropy(net(")
    train_line = _line(lines, "net.train()")
    watcher, status, _ = run_in_process(script)
    assert status == 0
    [finding] = [f for f in watcher.findings if f.code == "TG102"]
    assert finding.line == loop_line
    assert "belongs at the top of this loop" in finding.message, finding.message
    assert f"runs only once, at line {train_line} before it" in finding.message
    assert f"the eval() at buggy.py:{eval_line} (in test())" in finding.message
    assert f"the training forward at buggy.py:{forward_line}" in finding.message
    assert f"the loop at line {loop_line}" in finding.fix


def test_a_helper_eval_among_the_steps_is_reported_where_the_helper_returns():
    script = CASES / "tg102_validation_helper_mid_epoch" / "buggy.py"
    lines = script.read_text().splitlines()
    eval_line, train_line = _line(lines, "model.eval()"), _line(lines, "self.model.train()")
    forward_line = _line(lines, "F.cross_entropy(self.model(")
    call_line = _line(lines, "print(epoch, self.steps, self._validate())")
    return_line = _line(lines, "return model(tokens).argmax(-1)")
    watcher, status, _ = run_in_process(script)
    assert status == 0
    [finding] = [f for f in watcher.findings if f.code == "TG102"]
    # train() runs every epoch; the helper's eval() runs among the steps: the helper returns
    # with the model in eval mode; the training loop's line that led to it is the other place
    assert finding.line == return_line
    assert f"predict() puts Seq2Label in eval mode (Seq2Label.eval() at buggy.py:{eval_line})" \
        in finding.message
    assert f"it was called at buggy.py:{call_line}" in finding.message
    assert f"after the call at buggy.py:{call_line}" in finding.fix
    assert f"the training forward at buggy.py:{forward_line}" in finding.message, finding.message
    assert f"the last model.train() at buggy.py:{train_line} ran before it" in finding.message


def test_only_the_outermost_mode_call_is_noted_and_train_forgets_it():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    watcher = Watcher(stream=None).start()
    try:
        model.eval()
        noted = dict(watcher.state.eval_at)
        model[1].train()
        model.train()
        after = dict(watcher.state.eval_at)
        tg102 = next(c for c in watcher.checks if c.code == "TG102")
        trained = dict(tg102.train_at)
    finally:
        watcher.stop()
    assert list(noted) == [id(model)]  # not each child that Module.train recursed into
    assert noted[id(model)][0]() is model and noted[id(model)][1][1] > 0
    assert after == {}
    # TG102 notes train() too (on_mode): the child's call and the model's, each with whether it
    # was in eval mode
    assert trained[id(model)][0]() is model and trained[id(model)][3] is True
    assert trained[id(model[1])][3] is True
    assert model.training and torch.is_grad_enabled()
