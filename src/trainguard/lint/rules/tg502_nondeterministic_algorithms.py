"""TG502 nondeterministic-algorithms: ``cudnn.benchmark = True`` in a run that asks to be
deterministic.

``cudnn.benchmark`` picks the fastest convolution algorithm by timing, which can differ between
runs (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking); it
undoes ``cudnn.deterministic = True`` / ``use_deterministic_algorithms(True)`` set elsewhere in
the same script. Silent when the two sit in opposite branches of one ``if`` (deterministic when a
seed is given, fast otherwise).

A seeding helper (a function that seeds torch and numpy or ``random``, whatever its name) that
sets ``benchmark = True`` unconditionally asks for a run that repeats and defeats it in the
same breath (lppllppl920/EndoscopyDepthEstimation-Pytorch#17); benchmark mode chosen outside
such a helper, or under a branch of it, is the user's choice of speed and stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, exclusive, if_branches, is_true, walk_local
from trainguard.lint.repro import Repro
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG502"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if "benchmark" not in script.source:
        return
    flags = Repro(script).deterministic_flags
    for node in script.nodes:
        if not (isinstance(node, ast.Assign) and is_true(node.value) and any(
                (dotted(t) or "").endswith("cudnn.benchmark") for t in node.targets)):
            continue
        seeding = _seeding_function(script, node)
        if seeding is not None:
            why = f"{seeding.name}() seeds every generator so that runs repeat, yet"
        elif flags and not all(exclusive(node, f) for f in flags):
            why = f"the deterministic setting at {script.at(flags[0].lineno)} is undone:"
        else:
            continue
        value = node.value
        yield Hit(node, f"cudnn.benchmark = True: {why} convolution algorithms are chosen by "
                        f"timing and differ between runs",
                  fix="set torch.backends.cudnn.benchmark = False when the run must be "
                      "reproducible",
                  edits=[Edit(value.lineno, value.col_offset, value.end_lineno or value.lineno,
                              value.end_col_offset or 0, "False")], safe=False)


def _seeding_function(script: Script, node: ast.AST) -> ast.AST | None:
    """The function around ``node`` when it seeds torch and numpy or random unconditionally
    (a ``seed_everything``-style helper, whatever its name): its purpose is a run that
    repeats, which benchmark mode defeats. A branch choosing between speed and determinism
    (``if deterministic: ... else: benchmark = True``) is the user's choice and stays silent."""
    func = script.enclosing_function(node)
    if func is None or if_branches(node):
        return None
    seeded: set[str] = set()
    for sub in walk_local(func):
        if isinstance(sub, ast.Call) and not if_branches(sub):
            q = script.call_qualname(sub) or ""
            if q.startswith("torch.") and q.endswith("manual_seed"):
                seeded.add("torch")
            elif q in ("numpy.random.seed", "random.seed"):
                seeded.add("other")
    return func if seeded == {"torch", "other"} else None
