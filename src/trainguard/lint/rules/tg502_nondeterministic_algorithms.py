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

from trainguard.lint.astutil import dotted, exclusive, if_branches, is_true, parent, walk_local
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
        beside = _seeded_beside(script, node) if seeding is None else None
        if seeding is not None:
            why = f"{seeding.name}() seeds every generator so that runs repeat, yet"
        elif flags and not all(exclusive(node, f) for f in flags):
            why = f"the deterministic setting at {script.at(flags[0].lineno)} is undone:"
        elif beside is not None:
            why = (f"the run seeds its generators ({ast.unparse(beside.func)}(...) at "
                   f"{script.at(beside.lineno)}) so that runs repeat, yet")
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
    return func if _seeds(script, func) == {"torch", "other"} else None


def _seeded_beside(script: Script, node: ast.AST) -> ast.Call | None:
    """The call beside ``node`` (in the same function, or at the top level of the script, a
    ``__main__`` block included) that seeds torch and numpy or random unconditionally, directly
    or through a helper it calls (``set_random_seeds(seed)`` from another file of the project):
    a run set up to repeat. None when ``node`` sits under another ``if``."""
    scope = script.enclosing_function(node) or script.tree
    if _guarded(node):
        return None
    seeded: set[str] = set()
    last = None
    for sub in sorted((n for n in walk_local(scope) if isinstance(n, ast.Call)),
                      key=lambda n: (n.lineno, n.col_offset)):
        if _guarded(sub):
            continue
        found = _seeds_in_call(script, sub) or {
            f for t in script.targets(sub)[:2] for f in _seeds(t.script, t.func)}
        if found - seeded:
            seeded |= found
            last = sub
    return last if seeded == {"torch", "other"} else None


def _seeds(script: Script, scope: ast.AST) -> set[str]:
    """Which of torch and the others (numpy, random) ``scope`` seeds with a value, outside any
    ``if``."""
    return {f for sub in walk_local(scope) if isinstance(sub, ast.Call) and not _guarded(sub)
            for f in _seeds_in_call(script, sub)}


def _seeds_in_call(script: Script, call: ast.Call) -> set[str]:
    q = script.call_qualname(call) or ""
    if not (call.args or call.keywords):
        return set()  # random.seed(): a seed from the OS
    if q.startswith("torch.") and q.endswith("manual_seed"):
        return {"torch"}
    return {"other"} if q in ("numpy.random.seed", "random.seed") else set()


def _guarded(node: ast.AST) -> bool:
    """Under an ``if`` other than ``if __name__ == "__main__":``."""
    return any(not _main_guard(n) for n in _ifs(node))


def _ifs(node: ast.AST) -> Iterator[ast.If]:
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, ast.If) and n is not p.test:
            yield p
        n = p


def _main_guard(node: ast.If) -> bool:
    t = node.test
    return isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and \
        t.left.id == "__name__" and len(t.comparators) == 1 and \
        isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__"
