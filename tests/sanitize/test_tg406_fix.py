"""TG406's advice at the sigmoid: where the sigmoid rebinds the logits' own name and the function
reads that name as probabilities too (a soft-Dice term beside BCEWithLogitsLoss,
itakurah/focal-loss-pytorch#5), dropping the sigmoid would change the Dice term, so the fix binds
the probabilities to a new name; a sigmoid whose output only the loss reads keeps the usual fix."""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def _finding(case: str):
    watcher, status, _ = run_in_process(CASES / case / "buggy.py")
    assert status == 0
    [finding] = [f for f in watcher.findings if f.code == "TG406"]
    return finding


def test_a_sigmoid_that_rebinds_the_logits_name_is_given_a_new_name():
    finding = _finding("tg406_sigmoid_rebinds_the_logits_name")
    assert "bind the probabilities to a new name (`probs = torch.sigmoid(preds)`)" in finding.fix
    assert "give the loss `preds` (the logits)" in finding.fix
    assert "drop the sigmoid" not in finding.fix


def test_a_sigmoid_only_the_loss_reads_is_dropped():
    finding = _finding("tg406_sigmoid_then_bce_with_logits")
    assert "drop the sigmoid" in finding.fix, finding.fix
