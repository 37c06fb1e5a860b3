"""TG304 looks again later in the run: parameters unfrozen after the loop settled, and an optimizer
left holding an earlier model's parameters (also when zero_grad leaves zeros, not None)."""

from __future__ import annotations

import textwrap

import pytest

from sanitize_helpers import run_in_process

PRELUDE = textwrap.dedent("""
    import torch
    from torch import nn
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
""")

UNFREEZE = textwrap.dedent("""
    backbone = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    model = nn.Sequential(backbone, nn.Linear(16, 3))
    backbone.requires_grad_(False)
    optimizer = torch.optim.SGD(model[1].parameters(), lr=0.05)
    for step in range(400):
        if step == 300:
            backbone.requires_grad_(True)
            FIX
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()  # expect: TG304
""")

KFOLD = textwrap.dedent("""
    optimizer = None
    for fold in range(3):
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        if optimizer is None or FIXED:
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(40):
            optimizer.zero_grad(set_to_none=False)
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()  # expect: TG304
""")


def _expected(source: str) -> set[tuple[str, int]]:
    return {(line.split("# expect: ")[1].strip(), n)
            for n, line in enumerate(source.splitlines(), 1) if "# expect: " in line}


@pytest.mark.parametrize("fix", ["", "optimizer.add_param_group({'params': backbone.parameters()})",
                                 "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)"])
def test_unfrozen_after_the_loop_settled(fix, tmp_path):
    source = PRELUDE + UNFREEZE.replace("FIX", fix or "pass")
    path = tmp_path / "unfreeze.py"
    path.write_text(source)
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    got = {(f.code, f.line) for f in watcher.findings}
    assert got == (set() if fix else _expected(source)), [f.format() for f in watcher.findings]
    assert watcher.cadence.settled >= 1
    if not fix:
        message = watcher.findings[0].message
        assert "2 parameters of Sequential (144 values: `0.0.weight` (16, 8)" in message, message
        assert "unfrozen" in message


@pytest.mark.parametrize("fixed", [False, True])
def test_optimizer_built_once_for_folds_with_zeroed_grads(fixed, tmp_path):
    source = PRELUDE + KFOLD.replace("FIXED", str(fixed))
    path = tmp_path / "kfold.py"
    path.write_text(source)
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    got = {(f.code, f.line) for f in watcher.findings}
    assert got == (set() if fixed else _expected(source)), [f.format() for f in watcher.findings]
    if not fixed:
        finding = watcher.findings[0]
        assert finding.count == 2  # folds 1 and 2
        assert "the Adam that steps holds parameters none of which has a gradient" in finding.message


def test_gradients_left_over_from_an_earlier_phase_stay_silent(tmp_path):
    # Phase 2 trains the head only with a new optimizer; the backbone runs under no_grad but keeps
    # requires_grad and the .grad of phase 1's last backward: no optimizer holds it any more, yet it
    # gets no new gradient, so nothing is wrong.
    source = PRELUDE + textwrap.dedent("""
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(100):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        optimizer = torch.optim.SGD(model[2].parameters(), lr=0.05)
        for step in range(200):
            with torch.no_grad():
                features = model[1](model[0](x))
            optimizer.zero_grad()
            nn.functional.cross_entropy(model[2](features), y).backward()
            optimizer.step()
        assert model[0].weight.grad is not None
    """)
    path = tmp_path / "phases.py"
    path.write_text(source)
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    assert watcher.findings == [], [f.format() for f in watcher.findings]
    # the unchanged leftovers are kept as noted, not noted afresh at each look (which would keep
    # the loop from settling): phase 2 settles like phase 1
    assert watcher.cadence.steps_skipped > 200, watcher.cadence.steps_skipped
