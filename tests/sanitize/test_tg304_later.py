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
    optimizer = torch.optim.SGD(model[1].parameters(), lr=0.05)  # expect: TG304
    for step in range(STEPS):
        if step == AT:
            backbone.requires_grad_(True)
            FIX
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
""")

KFOLD = textwrap.dedent("""
    optimizer = None
    for fold in range(3):
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        if optimizer is None or FIXED:
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)  # expect: TG304
        for step in range(40):
            optimizer.zero_grad(set_to_none=False)
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
""")


def _expected(source: str) -> set[tuple[str, int]]:
    return {(line.split("# expect: ")[1].strip(), n)
            for n, line in enumerate(source.splitlines(), 1) if "# expect: " in line}


def _watch(source: str, path):
    """Run ``source`` as the script ``path`` under a fresh watcher; it must exit 0."""
    path.write_text(source)
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    return watcher


@pytest.mark.parametrize("fix", ["", "optimizer.add_param_group({'params': backbone.parameters()})",
                                 "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)"])
def test_unfrozen_after_the_loop_settled(fix, tmp_path):
    source = PRELUDE + UNFREEZE.replace("FIX", fix or "pass").replace("STEPS", "400").replace(
        "AT", "300")
    watcher = _watch(source, tmp_path / "unfreeze.py")
    got = {(f.code, f.line) for f in watcher.findings}
    assert got == (set() if fix else _expected(source)), [f.format() for f in watcher.findings]
    assert watcher.cadence.settled >= 1
    if not fix:
        message = watcher.findings[0].message
        assert "2 parameters of Sequential (144 values: `0.0.weight` (16, 8)" in message, message
        assert "unfrozen" in message


@pytest.mark.parametrize("fix", ["", "optimizer.add_param_group({'params': backbone.parameters()})"])
def test_unfrozen_in_the_last_steps_of_a_run(fix, tmp_path):
    """Unfrozen at step 100 of 115 ("fine-tune everything at the end"): the look after step 112
    is made although the loop is settled, and the run's end confirms it."""
    source = PRELUDE + UNFREEZE.replace("FIX", fix or "pass").replace("STEPS", "115").replace(
        "AT", "100")
    watcher = _watch(source, tmp_path / "unfreeze_late.py")
    got = {(f.code, f.line) for f in watcher.findings}
    assert got == (set() if fix else _expected(source)), [f.format() for f in watcher.findings]
    assert watcher.cadence.steps_skipped > 80


@pytest.mark.parametrize("fixed", [False, True])
def test_optimizer_built_once_for_folds_with_zeroed_grads(fixed, tmp_path):
    source = PRELUDE + KFOLD.replace("FIXED", str(fixed))
    watcher = _watch(source, tmp_path / "kfold.py")
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
    watcher = _watch(source, tmp_path / "phases.py")
    assert watcher.findings == [], [f.format() for f in watcher.findings]
    # the unchanged leftovers are kept as noted, not noted afresh at each look (which would keep
    # the loop from settling): phase 2 settles like phase 1
    assert watcher.cadence.steps_skipped > 200, watcher.cadence.steps_skipped


SILENT = {
    # a backbone optimizer that exists from the start but steps only after a warm-up
    "delayed_optimizer": """
        backbone, head = nn.Sequential(nn.Linear(8, 16), nn.Tanh()), nn.Linear(16, 3)
        model = nn.Sequential(backbone, head)
        head_opt = torch.optim.Adam(head.parameters(), lr=1e-2)
        backbone_opt = torch.optim.Adam(backbone.parameters(), lr=1e-3)
        for step in range(120):
            head_opt.zero_grad()
            backbone_opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            head_opt.step()
            if step >= 60:
                backbone_opt.step()
    """,
    # a Lagrange multiplier kept as a parameter of the model and updated by hand
    "dual_variable": """
        class Constrained(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 3)
                self.lam = nn.Parameter(torch.tensor(0.0))
            def forward(self, x):
                return self.net(x)
        model = Constrained()
        optimizer = torch.optim.Adam(model.net.parameters(), lr=1e-2)
        for step in range(120):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y) + model.lam * (logits.abs().mean() - 1)
            optimizer.zero_grad()
            model.lam.grad = None
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                model.lam.add_(0.05 * model.lam.grad).clamp_(min=0.0)
    """,
    # one optimizer per task head, stepped every iteration (idle heads have no gradient), and a
    # fixed feature network left trainable
    "idle_head_optimizers": """
        encoder = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
        heads = nn.ModuleList(nn.Linear(16, 3) for _ in range(4))
        features = nn.Linear(3, 4)
        optimizers = [torch.optim.Adam(encoder.parameters(), lr=1e-3)]
        optimizers += [torch.optim.Adam(h.parameters(), lr=1e-2) for h in heads]
        target = torch.randn(64, 3)
        for step in range(120):
            for o in optimizers:
                o.zero_grad()
            pred = heads[step % 4](encoder(x))
            loss = nn.functional.mse_loss(pred, target)
            loss = loss + 0.1 * nn.functional.mse_loss(features(pred), features(target))
            loss.backward()
            for o in optimizers:
                o.step()
    """,
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_parameters_trained_some_other_way_stay_silent(name, tmp_path):
    watcher = _watch(PRELUDE + textwrap.dedent(SILENT[name]), tmp_path / f"{name}.py")
    assert watcher.findings == [], [f.format() for f in watcher.findings]


def test_layers_kept_in_a_plain_list(tmp_path):
    source = PRELUDE + textwrap.dedent("""
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = nn.Linear(8, 16)
                self.hidden = [nn.Linear(16, 16)]  # not registered: should be nn.ModuleList
                self.out = nn.Linear(16, 3)
            def forward(self, x):
                h = self.inp(x).tanh()
                for layer in self.hidden:
                    h = layer(h).tanh()
                return self.out(h)
        model = MLP()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)  # expect: TG304
        for step in range(40):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    """)
    watcher = _watch(source, tmp_path / "plain_list.py")
    assert {(f.code, f.line) for f in watcher.findings} == _expected(source)
    message = watcher.findings[0].message
    assert message.startswith("2 parameters of MLP (272 values: `hidden[0].weight` (16, 16)")
    assert "plain Python container `hidden`" in message, message


def test_one_parameter_is_worded_in_the_singular(tmp_path):
    source = PRELUDE + textwrap.dedent("""
        model = nn.Linear(8, 3)
        optimizer = torch.optim.SGD([model.weight], lr=0.05)  # expect: TG304
        for step in range(40):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    """)
    watcher = _watch(source, tmp_path / "bias_left_out.py")
    assert {(f.code, f.line) for f in watcher.findings} == _expected(source)
    assert watcher.findings[0].message.startswith(
        "1 parameter of Linear (3 values: `bias` (3,)) receives gradients but no optimizer "
        "holds it, so it never changes"), watcher.findings[0]
