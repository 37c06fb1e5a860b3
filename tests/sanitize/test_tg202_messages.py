"""TG202's diagnosis tells apart the two common forms of "backward through the graph a second
time": an output used by two backward calls in one iteration (a GAN's generator output used by the
discriminator's loss and, after ``opt_d.step()``, by the generator's: detach it for D) and a tensor
carried across iterations (an RNN's hidden state: detach what is carried)."""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def _diagnosis(case: str):
    watcher, status, _ = run_in_process(CASES / case / "buggy.py")
    assert status != 0
    [finding] = [f for f in watcher.findings if f.code == "TG202"]
    return finding


def test_a_gan_output_used_by_both_backward_calls_is_one_iteration_not_a_carried_tensor():
    finding = _diagnosis("tg202_gan_fake_used_twice")
    assert "in the same iteration (an optimizer step ran between the two backward calls" in \
        finding.message, finding.message
    assert "two backward calls through one graph" in finding.message
    assert "carried across iterations" not in finding.message
    assert "D(fake.detach())" in finding.fix and "hidden.detach()" not in finding.fix


def test_an_rnn_hidden_state_carried_across_iterations_is_still_called_carried():
    finding = _diagnosis("tg202_rnn_hidden_carried")
    assert "carried across iterations" in finding.message, finding.message
    assert "hidden = hidden.detach()" in finding.fix


def test_two_losses_of_one_step_are_still_the_same_step():
    finding = _diagnosis("tg202_two_losses")
    assert "already freed in the same step: two backward calls through one graph" in \
        finding.message, finding.message
