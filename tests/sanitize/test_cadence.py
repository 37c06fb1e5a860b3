"""Settled steps (sanitize/cadence.py): which steps the checks see, and that bugs appearing after a
loop has settled are still found where they happen."""

from __future__ import annotations

import io
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainguard.config import Config
from trainguard.sanitize.core.cadence import BACKWARD, FORWARD, STEP, Cadence
from trainguard.sanitize.checks import Check
from trainguard.sanitize.watcher import Watcher

CYCLE = [("Z", 1), ("F", 2), ("L", 3), ("B", 4), ("S", 5), ("s", 5)]


class _Loop:
    """Feeds a Cadence cycles of keys; records what went to the checks and every resume."""

    def __init__(self, **kwargs) -> None:
        self.resumes: list[bool] = []
        self.settles: list[int] = []  # cycles run when the cadence said it settled
        self.cycles = 0
        self.cadence = Cadence(resume=self.resumes.append,
                               settle=lambda: self.settles.append(self.cycles), **kwargs)
        self.reports = 0
        self.armed = False

    def cycle(self, keys=CYCLE, optimizer: object = "opt") -> list[bool]:
        seen = [self.cadence.see(k) for k in keys]
        self.cycles += 1
        self.cadence.boundary(optimizer, self.reports, self.armed)
        return seen


def test_settles_after_eight_identical_clean_cycles_then_checks_one_in_sixteen():
    loop = _Loop()
    checked = [all(loop.cycle()) for _ in range(8)]
    assert checked == [True] * 8 and loop.cadence.skipping
    after = [loop.cycle() for _ in range(40)]
    full = [i for i, seen in enumerate(after) if all(seen)]
    assert all(not any(seen) for i, seen in enumerate(after) if i not in full)
    assert full == [15, 31]  # the 16th and 32nd cycles after settling
    assert loop.resumes == [True, True]  # told before each sampled cycle
    assert loop.settles == [8, 24, 40]  # told when it settled, and again after each sample
    assert loop.cadence.steps_skipped == 38
    every = _Loop(every=1)  # checks every cycle: never says it settled
    assert all(all(every.cycle()) for _ in range(30)) and every.settles == []


def test_after_eight_clean_samples_one_cycle_in_thirty_two_until_it_settles_again():
    loop = _Loop()
    for _ in range(8):
        loop.cycle()
    after = [all(loop.cycle()) for _ in range(8 * 16 + 3 * 32)]
    full = [i for i, seen in enumerate(after) if seen]
    # eight samples 16 cycles apart, then 32 apart
    assert full == [16 * k - 1 for k in range(1, 9)] + [128 + 32 * k - 1 for k in range(1, 4)]
    # a cycle that differs ends the settled stretch: once it settles again (after two clean
    # cycles, since it settled on that cycle before), one in 16 again
    loop.cycle(CYCLE[:4] + [("S", 9), ("s", 9)])
    for _ in range(2):
        loop.cycle()
    assert loop.cadence.skipping
    again = [all(loop.cycle()) for _ in range(40)]
    assert [i for i, seen in enumerate(again) if seen] == [15, 31]


@pytest.mark.parametrize("spoil", ["report", "armed", "hold", "different"])
def test_a_cycle_with_a_report_an_armed_check_a_hold_or_other_calls_never_settles(spoil):
    loop = _Loop()
    for i in range(30):
        keys = CYCLE
        if spoil == "report":
            loop.reports += 1
        elif spoil == "armed":
            loop.armed = True
        elif spoil == "hold":
            loop.cadence.hold()
        elif i % 2:
            keys = CYCLE[:2] + [("F", 9)] + CYCLE[2:]
        assert all(loop.cycle(keys))
    assert not loop.cadence.skipping and loop.cadence.steps_skipped == 0


def test_a_differing_call_goes_to_the_checks_after_a_resume_and_resettles_later():
    loop = _Loop()
    for _ in range(10):
        loop.cycle()
    assert loop.cadence.skipping
    # an evaluation forward right after a step: a resume at the boundary
    assert loop.cadence.see(("F", 2, "eval")) is True
    assert loop.resumes == [True] and not loop.cadence.skipping
    loop.cycle()  # the rest of that cycle (its keys are recorded, not skipped)
    # in the middle of a cycle: the calls before it in this cycle were not seen
    for _ in range(8):
        loop.cycle()
    assert loop.cadence.skipping
    seen = loop.cycle(CYCLE[:3] + [("B", 99)] + CYCLE[4:])
    assert seen == [False, False, False, True, True, True]
    assert loop.resumes == [True, False]
    # a partial cycle is not clean: two more like the cycle it had settled on are needed
    # before settling again (eight for a cycle it never settled on)
    assert all(loop.cycle())
    assert not loop.cadence.skipping
    loop.cycle()
    assert loop.cadence.skipping


def test_a_cycle_settled_on_before_settles_again_after_two_clean_cycles_a_new_one_after_eight():
    loop = _Loop()
    for _ in range(8):
        loop.cycle()
    assert loop.cadence.skipping and loop.settles == [8]
    evaluation = CYCLE[:4] + [("F", 2, "eval"), ("L", 3, "eval")] + CYCLE[4:]
    for _ in range(3):  # an epoch: training cycles, then one with the evaluation pass in it
        # the pass's calls and the rest of that cycle go to the checks; the settled cycle with
        # an interlude inserted settles again at once
        assert loop.cycle(evaluation) == [False] * 4 + [True] * 4
        assert loop.cadence.skipping
        assert not any(loop.cycle()) and not any(loop.cycle()) and not any(loop.cycle())
    assert loop.settles == [8, 9, 13, 17]  # (an epoch here: four cycles)
    # a cycle in which a call of the settled cycle changed (not only calls inserted) is checked
    # and the training cycle seen twice again before settling
    changed = CYCLE[:3] + [("B", 8)] + CYCLE[4:]
    assert loop.cycle(changed) == [False] * 3 + [True] * 3
    assert all(loop.cycle()) and all(loop.cycle()) and loop.cadence.skipping
    # the same interlude in two cycles in a row: the second is a new cycle (checked in full,
    # like the third; it would settle after eight)
    loop.cycle(evaluation)
    assert loop.cadence.skipping
    assert loop.cycle(evaluation) == [False] * 4 + [True] * 4
    assert all(loop.cycle(evaluation)) and not loop.cadence.skipping
    # a checked cycle with a report does not settle, interlude or not
    strict_report = _Loop()
    for _ in range(8):
        strict_report.cycle()
    strict_report.reports += 1
    strict_report.cycle(evaluation)
    assert all(strict_report.cycle())
    # a new training cycle (other lines) is checked eight times, as at the start
    other = [("Z", 1), ("F", 7), ("L", 3), ("B", 4), ("S", 5), ("s", 5)]
    for _ in range(2):
        loop.cycle()
    assert loop.cadence.skipping
    assert loop.cycle(other) == [False] + [True] * 5  # (its start matched the settled cycle)
    assert all(all(loop.cycle(other)) for _ in range(7)) and not loop.cadence.skipping
    assert all(loop.cycle(other)) and loop.cadence.skipping
    # with resettle_after = settle_after the old rule holds: eight every time
    strict = _Loop(resettle_after=8)
    for _ in range(8):
        strict.cycle()
    strict.cycle(changed)
    assert [all(strict.cycle()) for _ in range(8)] == [True] * 8 and strict.cadence.skipping
    with pytest.raises(ValueError):
        Cadence(settle_after=4, resettle_after=5)


def test_two_optimizers_make_one_cycle_and_every_step_disables_settling():
    loop = _Loop()
    for _ in range(12):  # a GAN: D steps, then G steps
        seen = [loop.cadence.see(k) for k in CYCLE]
        loop.cadence.boundary("D", 0, False)
        seen += [loop.cadence.see(k) for k in CYCLE]
        loop.cadence.boundary("G", 0, False)
    assert loop.cadence.skipping and not any(seen)
    off = _Loop(enabled=False)
    assert all(all(off.cycle()) for _ in range(40)) and off.cadence.steps_skipped == 0


class _Optimizer:
    """Stands in for an optimizer: the cadence only needs its identity and a weak reference."""


def test_a_new_optimizer_per_phase_bounds_the_cycles_once_the_first_is_freed():
    loop = _Loop()
    first = _Optimizer()
    for _ in range(10):
        loop.cycle(optimizer=first)
    assert loop.cadence.skipping
    second = _Optimizer()  # phase 2 (or the next fold) builds its own optimizer ...
    del first  # ... and the first one is freed
    phase2 = CYCLE[:4] + [("S", 6), ("s", 6)]
    seen = [loop.cycle(phase2, optimizer=second) for _ in range(14)]
    assert seen[0] == [False] * 4 + [True] * 2  # checked from its first differing call
    # the boundary moves to its steps; the next cycle is not counted clean (the one it ends began
    # unseen), then 8 clean cycles settle the loop
    assert all(all(cycle) for cycle in seen[1:10])
    assert loop.cadence.skipping and not any(any(cycle) for cycle in seen[10:])
    # while the first optimizer lives on (it merely stopped stepping), the second one takes over
    # only after a long stretch of calls without it
    kept = _Loop()
    third = _Optimizer()
    for _ in range(10):
        kept.cycle(optimizer=third)
    fourth = _Optimizer()
    seen = [kept.cycle(phase2, optimizer=fourth) for _ in range(40)]
    assert all(all(cycle) for cycle in seen[1:]) and not kept.cadence.skipping


# ---- with PyTorch ---------------------------------------------------------------------------

class _Counts(Check):
    code = "TG201"  # any catalogue code: this check only counts what it is given

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        self.steps = 0
        self.forwards = 0
        self.resumes: list[bool] = []

    def on_step(self, optimizer) -> None:
        self.steps += 1

    def on_root_forward(self, call) -> None:
        self.forwards += 1

    def on_resume(self, boundary: bool) -> None:
        self.resumes.append(boundary)


def _train(steps: int, watcher: Watcher | None, loss_module: bool = False) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss() if loss_module else F.cross_entropy
    if watcher is not None:
        watcher.start()
    try:
        for _ in range(steps):
            x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    finally:
        if watcher is not None:
            watcher.stop()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("loss_module", [False, True], ids=["functional", "module"])
def test_a_settled_loop_keeps_exact_counters_and_the_same_weights(loss_module):
    plain = _train(200, None, loss_module)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_Counts])
    watched = _train(200, watcher, loss_module)
    assert all(torch.equal(a, b) for a, b in zip(plain, watched))
    counts = watcher.checks[0]
    skipped = watcher.cadence.steps_skipped
    # a loss module's call is not a model's forward, settled or not
    assert watcher.state.step == 200 and watcher.state.root_forwards == 200
    assert watcher.state.backward_count == 200
    assert skipped == 200 - counts.steps and counts.forwards == counts.steps
    # the first 8 steps, then one in 16 for 8 clean samples (128 steps), then one in 32
    expected = 8 + 8 + (200 - 8 - 8 * 16) // 32
    assert expected <= counts.steps <= expected + 1
    assert counts.resumes and set(counts.resumes) == {True}
    assert "settled steps repeated a checked one" in watcher.summary()


def test_every_step_checks_every_step():
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_Counts], every_step=True)
    _train(60, watcher)
    assert watcher.checks[0].steps == 60 and watcher.cadence.steps_skipped == 0


# Bugs that start after the loop has settled, each with its fixed twin (which must stay silent).
# Modelled on "Why is my validation accuracy changing between runs?"-style forum reports
# (https://discuss.pytorch.org/t/model-eval-vs-with-torch-no-grad/19615): validation after an
# epoch of training, without model.eval().
LATE = {
    "eval_without_eval_mode": ("""
        for epoch in range(3):
            model.train()
            for i in range(40):
                x, y = xs[i], ys[i]
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
            FIX_EVAL
            correct = 0  # expect: TG101
            with torch.no_grad():
                for i in range(5):
                    out = model(xs[i])
                    correct += (out.argmax(1) == ys[i]).sum().item()
    """, "model.eval()"),
    # the loss turns NaN at step 150 of 200 (a corrupt sample), long after the loop settled
    "nan_input_late": ("""
        for i in range(200):
            x, y = xs[i % 40].clone(), ys[i % 40]
            if i == 150:
                x[0, 0] = BAD
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()  # expect: TG405
            optimizer.step()
    """, None),
    # losses kept as tensors from step 100 on (a plot added mid-run), with their graphs; the
    # steps' calls do not change, so the leak is first seen on sampled steps
    "leak_starts_late": ("""
        history = []
        for i in range(200):
            x, y = xs[i % 40], ys[i % 40]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if i >= 100:
                history.append(KEEP)  # expect: TG201
    """, None),
    # a gradient-norm probe every 50 steps that clears the gradients it just measured, between
    # backward and step ("optimizer.zero_grad() in the wrong place", a classic forum answer)
    "probe_zeroes_before_step": ("""
        for i in range(200):
            x, y = xs[i % 40], ys[i % 40]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if i % 50 == 49:
                norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
                PROBE_ZERO  # expect: TG302
            optimizer.step()
    """, None),
    # every 50th step takes a separate branch (a checkpoint step) that forgets zero_grad
    "branch_without_zero_grad": ("""
        for i in range(200):
            x, y = xs[i % 40], ys[i % 40]
            if i % 50 == 49:
                BRANCH_ZERO
                loss = F.cross_entropy(model(x), y)  # expect: TG301
                loss.backward()
                optimizer.step()
                continue
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    """, None),
    # a loss kept as a tensor every 50th step (for a plot), with its graph
    "sparse_leak": ("""
        history = []
        for i in range(260):
            x, y = xs[i % 40], ys[i % 40]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if i % 50 == 0:
                history.append(KEEP)  # expect: TG201
    """, None),
    # mixed precision with a GradScaler: a corrupt batch at step 151 gives a NaN loss, the scaler
    # skips that step, so the weights stay finite and no later step shows it
    "scaler_nan_once": ("""
        scaler = torch.amp.GradScaler("cpu")
        for i in range(200):
            x, y = xs[i % 40].clone(), ys[i % 40]
            if i == 150:
                x[0, 0] = BAD
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()  # expect: TG405
            scaler.step(optimizer)
            scaler.update()
    """, None),
    # one validation batch every 50 steps through the training loop's own `compute_loss()`,
    # without model.eval(): the model call and the loss repeat the settled cycle's lines and modes,
    # only the line that called compute_loss() differs
    "shared_compute_loss_one_val_batch": ("""
        def compute_loss(x, y):
            return F.cross_entropy(model(x), y)  # expect: TG101

        for i in range(200):
            x, y = xs[i % 40], ys[i % 40]
            loss = compute_loss(x, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % 50 == 45:
                FIX_EVAL
                val_loss = compute_loss(xs[0], ys[0])
                model.train()
                torch.set_grad_enabled(True)
                print(i, val_loss.item())
    """, "model.eval(); torch.set_grad_enabled(False)"),
    # one validation batch per epoch through a step function that trains when asked to
    "shared_step_one_val_batch": ("""
        def run_batch(x, y, train):
            out = model(x)  # expect: TG101
            loss = F.cross_entropy(out, y)
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            return loss.item()

        for epoch in range(4):
            model.train()
            for i in range(37):
                run_batch(xs[i], ys[i], True)
            FIX_EVAL
            print(epoch, run_batch(xs[0], ys[0], False))
            torch.set_grad_enabled(True)
    """, "model.eval(); torch.set_grad_enabled(False)"),
    # zero_grad dropped after step 100 (a refactor that moved it under a condition)
    "zero_grad_stops": ("""
        for i in range(160):
            x, y = xs[i % 40], ys[i % 40]
            if i < 100 or FIX_ALWAYS:
                optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)  # expect: TG301
            loss.backward()
            optimizer.step()
    """, None),
}

PRELUDE = """
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
xs = [torch.randn(16, 8) for _ in range(40)]
ys = [torch.randint(0, 3, (16,)) for _ in range(40)]
"""


def _script(name: str, fixed: bool) -> str:
    body, fix = LATE[name]
    body = textwrap.dedent(body)
    body = body.replace("FIX_EVAL", fix if fixed and fix else "pass")
    body = body.replace("BAD", "0.0" if fixed else "float('nan')")
    body = body.replace("FIX_ALWAYS", "True" if fixed else "False")
    body = body.replace("KEEP", "loss.item()" if fixed else "loss")
    body = body.replace("PROBE_ZERO", "pass" if fixed else "model.zero_grad()")
    body = body.replace("BRANCH_ZERO", "optimizer.zero_grad()" if fixed else "pass")
    return PRELUDE + body


@pytest.mark.parametrize("name", sorted(LATE))
def test_a_bug_that_starts_after_the_loop_settled_is_found_at_its_line(name, tmp_path):
    from sanitize_helpers import run_in_process

    for fixed in (False, True):
        source = _script(name, fixed)
        path = tmp_path / f"{name}_{'fixed' if fixed else 'buggy'}.py"
        path.write_text(source)
        watcher, status, stderr = run_in_process(path)
        assert status == 0, stderr
        got = {(f.code, f.line) for f in watcher.findings}
        expected = set() if fixed else {
            (line.split("# expect: ")[1].strip(), n)
            for n, line in enumerate(source.splitlines(), 1) if "# expect: " in line}
        assert got == expected, (name, fixed, [f.format() for f in watcher.findings])
        if not fixed:
            assert watcher.cadence.settled >= 1  # the bug came after the loop had settled
    if name in ("nan_input_late", "scaler_nan_once"):  # the exact step, and its cause
        watcher, _, _ = run_in_process(tmp_path / f"{name}_buggy.py")
        message = watcher.findings[0].message
        assert "at optimizer step 151" in message and "already holds NaN" in message, message
        # without a scaler the weights turn NaN; a GradScaler skips the step instead
        scaled = name == "scaler_nan_once"
        assert ("GradScaler skips every step" in message) == scaled, message
        assert ("an optimizer step on its gradients writes NaN/Inf into the weights" in message) \
            == (not scaled), message


def test_cli_every_step_flag(tmp_path):
    from sanitize_helpers import run_tg

    script = tmp_path / "loop.py"
    script.write_text(PRELUDE + textwrap.dedent("""
        for i in range(60):
            optimizer.zero_grad()
            F.cross_entropy(model(xs[i % 40]), ys[i % 40]).backward()
            optimizer.step()
    """))
    sampled = run_tg("run", str(script), cwd=tmp_path)
    every = run_tg("run", "--every-step", str(script), cwd=tmp_path)
    assert sampled.returncode == every.returncode == 0, sampled.stderr + every.stderr
    assert "settled steps repeated a checked one" in sampled.stderr
    assert "no findings" in every.stderr and "settled" not in every.stderr


def test_tg301_takes_its_hooks_off_while_settled_and_puts_them_back_to_check():
    """Settled steps are not judged, so their backward calls must not call TG301's
    post-accumulate-grad hooks; checked steps (samples, a changed loop) must carry them."""
    from trainguard.sanitize.checks.tg301_grads_accumulate import GradsAccumulate

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[GradsAccumulate])
    first = next(model.parameters())
    seen = []  # (settled after this step, the followed parameter carries a hook)
    with_zero_grad = True
    watcher.start()
    try:
        for i in range(120):
            if i == 90:
                with_zero_grad = False  # the bug starts after the loop settled
            if with_zero_grad:
                optimizer.zero_grad()
            F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 3, (16,))).backward()
            optimizer.step()
            seen.append((watcher.cadence.skipping, bool(first._post_accumulate_grad_hooks)))
    finally:
        watcher.stop()
    settled = [hooked for skipping, hooked in seen if skipping]
    checked = [hooked for skipping, hooked in seen[1:] if not skipping]
    assert len(settled) > 50 and not any(settled)
    assert len(checked) > 10 and all(checked)
    assert [f.code for f in watcher.findings] == ["TG301"]
    assert not first._post_accumulate_grad_hooks  # and none is left after the run


def test_a_loss_module_built_inside_the_loop_settles():
    """``nn.CrossEntropyLoss()(logits, y)`` makes a new module every step: the cycle key names the
    loss by its type, so the loop still settles."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    watcher = Watcher(config=Config(), stream=io.StringIO())
    with_module = []
    watcher.start()
    try:
        for _ in range(100):
            optimizer.zero_grad()
            criterion = nn.CrossEntropyLoss()
            with_module.append(criterion)  # kept alive: each step's module has its own id
            criterion(model(torch.randn(16, 8)), torch.randint(0, 3, (16,))).backward()
            optimizer.step()
    finally:
        watcher.stop()
    assert watcher.findings == []
    assert watcher.cadence.settled >= 1 and watcher.cadence.steps_skipped > 60


def test_tg301_puts_back_no_hook_on_a_parameter_frozen_while_settled():
    """Phases that freeze one part and train the other (``requires_grad_`` toggled per epoch, one
    optimizer over all): a followed parameter frozen while the loop was settled cannot take a hook
    when checking resumes, and must not make TG301 fail (TG002)."""
    torch.manual_seed(0)
    enc, dec = nn.Sequential(nn.Linear(16, 32), nn.ReLU()), nn.Linear(32, 1)
    model = nn.Sequential(enc, dec)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.randn(512, 16)
    y = x[:, :4].sum(1, keepdim=True)
    watcher = Watcher(config=Config(), stream=io.StringIO())
    watcher.start()
    try:
        for epoch in range(8):
            enc.requires_grad_(epoch % 2 == 0)
            dec.requires_grad_(epoch % 2 == 1)
            for i in range(0, 512, 32):
                optimizer.zero_grad(set_to_none=True)
                F.mse_loss(model(x[i:i + 32]), y[i:i + 32]).backward()
                optimizer.step()
    finally:
        watcher.stop()
    assert watcher.findings == [], [f.format() for f in watcher.findings]
    assert watcher.cadence.steps_skipped > 60


@pytest.mark.parametrize("init_scale, bad, expected", [
    # a huge scale: loss * scale overflows on every step while the loss (about 3.1) stays finite
    (3.0e38, "1.0", set()),
    # the default scale: the loss itself turns infinite at step 151, on a settled step
    (65536.0, "float('inf')", {"TG405"}),
])
def test_tg405_a_scaled_loss_counts_as_infinite_only_when_the_loss_must_be(init_scale, bad, expected,
                                                                            tmp_path):
    from sanitize_helpers import run_in_process

    path = tmp_path / "scaled.py"
    path.write_text(PRELUDE + textwrap.dedent(f"""
        scaler = torch.amp.GradScaler("cpu", init_scale={init_scale})
        for i in range(200):
            x, y = xs[i % 40], ys[i % 40]
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = (F.cross_entropy(model(x), y) + 2.0) * ({bad} if i == 150 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """))
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    assert {f.code for f in watcher.findings} == expected, [f.format() for f in watcher.findings]
    assert watcher.cadence.settled >= 1  # step 151 and most others were settled steps
    if expected:
        assert "at optimizer step 151" in watcher.findings[0].message, watcher.findings[0].message


# ---- loops without an optimizer step, and closures -------------------------------------------

def _bounded_by(loop: _Loop, level: int, keys, end) -> list[bool]:
    """One cycle of ``keys`` ended by a call of ``level`` (BACKWARD or FORWARD) from ``end``."""
    seen = [loop.cadence.see(k) for k in keys]
    loop.cycles += 1
    loop.cadence.call_end(level, end, loop.reports, loop.armed)
    return seen


@pytest.mark.parametrize("level", [BACKWARD, FORWARD], ids=["backward", "forward"])
def test_a_loop_without_optimizer_steps_settles_on_its_repeated_backward_or_forward(level):
    keys = [("Z", 1), ("F", 2), ("L", 3), ("B", 4)] if level == BACKWARD else [("F", 2)]
    loop = _Loop()
    checked = 0
    while not loop.cadence.skipping and checked < 20:
        assert all(_bounded_by(loop, level, keys, "line 9"))
        checked += 1
    # the first end of that line only names it; the second ends the first cycle (the calls of
    # both iterations: alike for a backward-ended block, which counts once), then eight alike
    # settle the loop
    assert checked == (9 if level == BACKWARD else 10) and loop.cadence.level == level
    after = [all(_bounded_by(loop, level, keys, "line 9")) for _ in range(40)]
    assert [i for i, seen in enumerate(after) if seen] == [15, 31]
    assert loop.resumes == [True, True]
    # another line's calls are not the boundary; a weaker kind of call is ignored
    loop.cadence.call_end(level, "line 12", 0, False)
    loop.cadence.call_end(FORWARD - 1 + (level == BACKWARD), "line 2", 0, False)
    assert loop.cadence.skipping


def test_the_first_optimizer_step_takes_the_boundary_over():
    loop = _Loop()
    for _ in range(12):
        _bounded_by(loop, BACKWARD, CYCLE[:4], "backward line")
    assert loop.cadence.skipping and loop.cadence.level == BACKWARD
    seen = loop.cycle()  # now an optimizer steps after the backward
    assert seen[-2:] == [True, True] and loop.cadence.level == STEP
    for _ in range(9):
        loop.cycle()
        loop.cadence.call_end(BACKWARD, "backward line", 0, False)  # ignored from now on
    assert loop.cadence.skipping


def test_closure_evaluations_count_once_whatever_their_number():
    # an LBFGS step: the step's pre-hook, then the closure (zero_grad, forward, loss, backward)
    # evaluated from 2 to 20 times
    def step(evaluations: int) -> list:
        return [("S", 1)] + [("Z", 1), ("F", 2), ("L", 3), ("B", 4)] * evaluations

    loop = _Loop()
    for n in [20, 20, 13, 2, 20, 17, 11, 20]:
        assert all(loop.cycle(step(n)))
    assert loop.cadence.skipping  # eight cycles alike once the repeats count once
    assert not any(any(loop.cycle(step(n))) for n in [20, 3, 14, 20, 5])
    # a different block ends the settled state
    seen = loop.cycle([("S", 1), ("Z", 1), ("F", 2), ("L", 3), ("B", 4), ("F", 7), ("B", 4)])
    assert seen[:5] == [False] * 5 and seen[5] is True and not loop.cadence.skipping


def _manual_sgd(iterations: int, watcher: Watcher | None, eval_at: int | None = None
                ) -> list[torch.Tensor]:
    """word_language_model's update: no optimizer, ``p.data.add_(p.grad, alpha=-lr)``."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
    if watcher is not None:
        watcher.start()
    try:
        for i in range(iterations):
            x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
            model.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            if i == eval_at:  # an evaluation without model.eval()
                correct = 0
                with torch.no_grad():
                    for _ in range(5):
                        x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
                        correct += (model(x).argmax(1) == y).sum().item()
    finally:
        if watcher is not None:
            watcher.stop()
    return [p.detach().clone() for p in model.parameters()]


def test_a_manual_sgd_loop_is_sampled_like_an_optimizer_loop_with_exact_counters():
    plain = _manual_sgd(200, None)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_Counts])
    watched = _manual_sgd(200, watcher)
    assert all(torch.equal(a, b) for a, b in zip(plain, watched))
    counts = watcher.checks[0]
    assert watcher.state.backward_count == 200 and watcher.state.root_forwards == 200
    assert watcher.cadence.level == BACKWARD
    # settled from the 10th iteration (the first end of the line names it), then 1 in 16 / 32
    assert 20 <= counts.forwards <= 22 and watcher.cadence.steps_skipped == 200 - counts.forwards
    assert "settled iterations repeated a checked one" in watcher.summary()


def test_an_evaluation_after_a_manual_sgd_loop_settled_is_still_checked():
    from trainguard.sanitize.checks.tg101_eval_in_train_mode import EvalInTrainMode

    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[EvalInTrainMode])
    _manual_sgd(120, watcher, eval_at=100)
    assert watcher.cadence.steps_skipped > 60
    assert [f.code for f in watcher.findings] == ["TG101"]
