"""TG101 on a training function that is also used to evaluate: told apart from batches skipped on
purpose by the lines that called it (see ``tg101_eval_in_train_mode.py``). The cases themselves
are in ``cases/tg101_step_function_shared_with_validation``, ``cases/tg101_phase_loop_without_eval``
and ``cases/tg101_training_function_two_phases_silent``; these tests read the finding closely."""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def test_the_finding_names_the_evaluating_and_the_training_callers_and_counts_every_call():
    watcher, status, stderr = run_in_process(
        CASES / "tg101_step_function_shared_with_validation" / "buggy.py")
    assert status == 0, stderr
    [finding] = watcher.findings
    assert (finding.code, finding.line) == ("TG101", 20)
    # 3 epochs x 2 validation batches, each reported once; the 30 training calls are not
    assert finding.count == 6, finding.format()
    assert "when called from line 32" in finding.message  # the validation sum
    assert "trains the model when called from line 31" in finding.message  # the training sum
    assert "BatchNorm1d(32), Dropout(p=0.3) active" in finding.message


def test_the_phase_loop_under_no_grad_is_reported_for_each_validation_batch():
    watcher, status, stderr = run_in_process(CASES / "tg101_phase_loop_without_eval" / "buggy.py")
    assert status == 0, stderr
    [finding] = watcher.findings
    assert finding.count == 4, finding.format()  # 2 epochs x 2 validation batches
    assert "under torch.no_grad()" in finding.message
    assert "the same line with grad enabled trains the model" in finding.message

