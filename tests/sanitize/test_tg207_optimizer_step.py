"""TG207's diagnosis when the tensor changed in place is a parameter an optimizer stepped: it
names the parameter (saved transposed by Linear) and the line of that optimizer's step, where
it is reported when that step ran between the forward and the failing backward in one call."""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def test_the_optimizer_step_that_changed_the_saved_weight_is_named():
    script = CASES / "tg207_gan_optimizer_step_before_backward" / "buggy.py"
    watcher, status, _ = run_in_process(script)
    assert status != 0  # the script still dies of PyTorch's error
    (finding,) = watcher.findings
    step_line = next(n for n, line in enumerate(script.read_text().splitlines(), start=1)
                     if line.strip().startswith("opt_D.step()"))
    assert "`2.weight` (1, 64) of Sequential (saved transposed, (64, 1))" in finding.message
    assert f"by Adam.step() at buggy.py:{step_line}" in finding.message
    # the step ran between the forward and this backward, in the same call: it is the place
    assert finding.line == step_line
