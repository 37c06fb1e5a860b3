"""The watcher itself: hooks come off, checks that fail never break the run, diagnoses are added
to PyTorch's errors, and a watched run computes exactly the same numbers."""

from __future__ import annotations

import gc
import inspect
import io
import runpy
import textwrap
import warnings
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as module_mod
from torch.optim import optimizer as optim_mod

import trainguard
from trainguard.config import Config
from trainguard.sanitize.checks import Check, Diagnosis, discover
from trainguard.sanitize.runner import run_target
from trainguard.sanitize.watcher import Watcher, watch


def _global_state():
    return (
        len(module_mod._global_forward_hooks), len(module_mod._global_forward_pre_hooks),
        len(optim_mod._global_optimizer_pre_hooks), len(optim_mod._global_optimizer_post_hooks),
        nn.Module.__call__, torch.autograd.backward, torch.save, torch.load, F.cross_entropy, F.dropout,
        F.scaled_dot_product_attention, torch.dropout, torch.alpha_dropout,
        torch.optim.Optimizer.zero_grad, nn.Module.zero_grad, nn.Module.train, warnings.showwarning,
    )


def _train(steps: int = 12) -> dict[str, torch.Tensor]:
    torch.manual_seed(123)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, 6))
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_watch_is_public_and_every_hook_comes_off():
    assert trainguard.watch is watch
    before = _global_state()
    with watch(summary=False) as w:
        assert _global_state() != before
        _train(3)
    assert _global_state() == before
    assert w.state.step == 3 and w.state.backward_count == 3
    with pytest.raises(ZeroDivisionError):
        with watch(summary=False):
            1 / 0
    assert _global_state() == before


def test_identical_weights_with_and_without_the_watcher():
    plain = _train()
    with watch(summary=False) as w:
        watched = _train()
    assert not w.findings
    assert plain.keys() == watched.keys()
    for key in plain:
        assert torch.equal(plain[key], watched[key]), key


RUN_SCRIPT = """
import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.1))
    def forward(self, x):
        return self.body(x).sum()
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(4):
    opt.zero_grad()
    net(torch.randn(8, 4)).backward()
    opt.step()
"""


def test_a_script_watched_in_process_leaves_nothing_of_its_own_alive(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(RUN_SCRIPT)
    with watch(summary=False) as w:
        names = runpy.run_path(str(script), run_name="__main__")
    assert w.state.step == 4
    net = weakref.ref(names["net"])
    del names
    gc.collect()
    # the caches kept per module class must not hold the script's class, whose methods hold
    # the script's globals (its model, data and optimizer)
    assert net() is None


FAILING_SCRIPT = """
import torch
import torch.nn.functional as F
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
        self.softmax = nn.Softmax(dim=1)
    def forward(self, x):
        return self.softmax(self.body(x))
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(net(torch.randn(8, 4)), torch.randint(0, 3, (8,))).backward()
    opt.step()
try:
    net(torch.randn(1, 4))
except ValueError:
    pass
"""


def test_a_stopped_watcher_keeps_no_model_of_its_run(tmp_path):
    # a trainer callback keeps its watcher after the fit: neither the module a failing call
    # passed through nor a per-class cache (TG401 reads the model's class) may keep the model
    script = tmp_path / "script.py"
    script.write_text(FAILING_SCRIPT)
    with watch(summary=False) as w:
        names = runpy.run_path(str(script), run_name="__main__")
    assert sorted(f.code for f in w.findings) == ["TG401", "TG404"]
    net = weakref.ref(names["net"])
    del names
    gc.collect()
    assert net() is None
    assert w.findings  # (the watcher itself is still held here)


def test_nested_watch_shares_the_outer_watcher():
    with watch(summary=False) as outer:
        with watch(summary=False) as inner:
            assert inner is outer
        assert nn.Module.__call__ is not module_mod.Module._wrapped_call_impl  # still installed


class _Boom(Check):
    code = "TG201"

    def on_step(self, optimizer):
        raise RuntimeError("internal failure")


def test_a_check_that_raises_becomes_tg002_and_the_script_finishes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import torch
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            opt.zero_grad()
            model(torch.ones(3, 2)).sum().backward()
            opt.step()
        DONE = True
        print("finished", step)
    """))
    stream = io.StringIO()
    tg101 = [c for c in discover() if c.code == "TG101"]
    watcher = Watcher(config=Config(), stream=stream, checks=[_Boom, *tg101]).start()
    try:
        status = run_target(str(script), [], kind="path")
    finally:
        watcher.stop()
    assert status == 0
    (finding,) = watcher.findings
    assert finding.code == "TG002" and finding.line == 7
    assert "check TG201 raised RuntimeError: internal failure" in finding.message
    assert "run went on" in finding.message
    assert all(c.code != "TG201" for handlers in watcher.handlers.values() for c, _ in handlers)
    assert any(c.code == "TG101" for c, _ in watcher.handlers["on_root_forward"])


def test_a_failing_wrapper_reports_tg002_and_the_run_computes_the_same(monkeypatch):
    """The wrappers' own bookkeeping (not only the checks) must never reach the user's code: here
    every location look-up raises, which every wrapper needs."""
    from trainguard.sanitize.core import frames as hooks

    def broken(*args, **kwargs):
        raise LookupError("location table corrupted")

    plain = _train()
    monkeypatch.setattr(hooks, "user_location", broken)
    with watch(summary=False) as w:
        watched = _train()
    for key in plain:
        assert torch.equal(plain[key], watched[key]), key
    # One finding per line (the forward and backward of one line merge), each counted.
    source, first = inspect.getsourcelines(_train)
    train = first + next(i for i, text in enumerate(source) if ".backward()" in text)
    evaluate = first + next(i for i, text in enumerate(source) if "model(torch.randn(4, 6))" in text)
    to_eval = first + next(i for i, text in enumerate(source) if "model.eval()" in text)
    built = first + next(i for i, text in enumerate(source) if "torch.optim.Adam(" in text)
    lines = {f.line: f for f in w.findings}
    assert all(f.code == "TG002" for f in w.findings)
    # (the seeding and step wrappers also report, depending on which tests ran before: every
    # finding is still a line of _train)
    assert {train, evaluate, to_eval, built} <= set(lines) <= set(range(first, first + len(source)))
    assert "wrapper of Adam.__init__ raised LookupError" in lines[built].message
    assert "wrapper of nn.Module.train raised LookupError" in lines[to_eval].message
    assert "wrapper of nn.Module.__call__ raised LookupError: location table corrupted" in (
        lines[train].message)
    assert lines[train].count >= 24  # 12 forwards and 12 backwards, each ran unobserved


class _Explains(Check):
    code = "TG204"

    def on_error(self, exc):
        if "does not require grad" in str(exc):
            return Diagnosis("the loss has no grad_fn", fix="build it with grad enabled")
        return None


def test_a_diagnosis_is_added_after_the_traceback_and_the_error_is_unchanged(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nloss = torch.ones(2).sum()\nloss.backward()\n")
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[_Explains]).start()
    errors = io.StringIO()
    try:
        import contextlib
        with contextlib.redirect_stderr(errors):
            status = run_target(str(script), [], kind="path", on_error=watcher.explain)
    finally:
        watcher.stop()
    assert status == 1
    text = errors.getvalue()
    original = text.index("RuntimeError: element 0 of tensors does not require grad")
    diagnosis = text.index("train.py:3:1: TG204 backward-without-grad: the loss has no grad_fn")
    assert original < diagnosis and "(fix: build it with grad enabled)" in text
    assert "docs: trainguard rule TG204" in text
    (finding,) = watcher.findings
    assert (finding.code, finding.line) == ("TG204", 3)


def _compiled_run(watched: bool) -> tuple[list[torch.Tensor], list]:
    torch._dynamo.reset()
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    kept = []

    def loop():
        for _ in range(5):
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
            optimizer.zero_grad()
            loss = F.cross_entropy(compiled(x), y)
            loss.backward()
            optimizer.step()
            kept.append(loss)  # a leak the watcher must still see around a compiled model

    findings = []
    if watched:
        with watch(summary=False, stream=io.StringIO()) as w:
            loop()
        findings = w.findings
    else:
        loop()
    return [p.detach().clone() for p in model.parameters()], findings


def test_compiled_model_trains_identically_and_is_still_watched():
    plain, _ = _compiled_run(False)
    watched, findings = _compiled_run(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, watched))
    assert [f.code for f in findings] == ["TG201"]
    torch._dynamo.reset()


def test_torch_export_traces_the_same_graph_and_no_event_is_recorded_while_it_traces():
    class WithLoss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(self.lin(x), y)

    model = WithLoss()
    args = (torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1]))
    plain = torch.export.export(model, args, strict=False)
    watcher = Watcher(config=Config(), stream=io.StringIO()).start()
    try:
        non_strict = torch.export.export(model, args, strict=False)
        strict = torch.export.export(model, args)
    finally:
        watcher.stop()
    assert str(non_strict.graph) == str(plain.graph) == str(strict.graph)
    # the traced calls are not the user's forwards: none was counted, nothing reported
    assert watcher.state.root_forwards == 0 and watcher.findings == []
    torch._dynamo.reset()


def test_a_watcher_can_be_stopped_and_started_again_on_the_same_run():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = Watcher(config=Config(), stream=io.StringIO())
    for _ in range(2):
        watcher.start()
        try:
            for _ in range(3):
                optimizer.zero_grad()
                model(torch.randn(5, 4)).pow(2).mean().backward()
                optimizer.step()
        finally:
            watcher.stop()
    assert not watcher.findings, [f.format() for f in watcher.findings]
    assert watcher.state.step == 6


def test_a_check_switched_off_after_raising_takes_its_hooks_off_the_parameters():
    """TG002: a check that raised gets no event again, ``on_exit`` included, so it must not leave
    its post-accumulate-grad hooks on the user's parameters for the rest of the run."""
    import io

    import torch
    import torch.nn.functional as F
    from torch import nn

    from trainguard.config import Config
    from trainguard.sanitize.checks.tg301_grads_accumulate import GradsAccumulate
    from trainguard.sanitize.watcher import Watcher

    class Failing(GradsAccumulate):
        def on_zero_grad(self, owner, set_to_none):
            if self.state.step >= 3:
                raise ValueError("an internal error")

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[Failing])
    hooked = []
    watcher.start()
    try:
        for _ in range(6):
            optimizer.zero_grad()
            F.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
            optimizer.step()
            hooked.append(bool(model.weight._post_accumulate_grad_hooks))
        assert [f.code for f in watcher.findings] == ["TG002"]
        assert hooked[:3] == [True] * 3 and hooked[3:] == [False] * 3  # off while still running
    finally:
        watcher.stop()
