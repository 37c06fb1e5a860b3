"""TG502 nondeterministic-algorithms: ``cudnn.benchmark = True`` in a run that asks to be
deterministic.

``cudnn.benchmark`` picks the fastest convolution algorithm by timing, which can differ between
runs (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking); it
undoes ``cudnn.deterministic = True`` / ``use_deterministic_algorithms(True)`` set elsewhere in
the same script, also when the request is a switch the program fixes to True
(``cudnn.deterministic = cfg.cudnn_deterministic``: :func:`_configured_flags`). Silent when the
two sit in opposite branches of one ``if`` (deterministic when a seed is given, fast otherwise).

A seeding helper (a function that seeds torch and numpy or ``random``, whatever its name) that
sets ``benchmark = True`` unconditionally asks for a run that repeats and defeats it in the
same breath (lppllppl920/EndoscopyDepthEstimation-Pytorch#17); benchmark mode chosen outside
such a helper, or under a branch of it, is the user's choice of speed and stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, encloses, exclusive, if_branches, is_false, \
    is_main_guard, is_true, parent, walk_local
from trainguard.lint.consts import resolve
from trainguard.lint.repro import Repro, seeds_in
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG502"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if "benchmark" not in script.source:
        return
    flags = Repro(script).deterministic_flags + _configured_flags(script)
    for node in script.nodes:
        if not (isinstance(node, ast.Assign) and is_true(node.value) and any(
                (dotted(t) or "").endswith("cudnn.benchmark") for t in node.targets)):
            continue
        if _after_training(script, node):
            continue  # benchmark turned on for timing after the last training step
        seeding = _seeding_function(script, node)
        beside = _seeded_beside(script, node) if seeding is None else None
        if seeding is None and beside is None:
            beside = _seeded_around_calls(script, node)
        if seeding is not None:
            why = f"{seeding.name}() seeds every generator so that runs repeat, yet"
        elif flags and not all(exclusive(node, f) or _turned_off_after(script, node, f)
                               for f in flags):
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


def _configured_flags(script: Script) -> list[ast.AST]:
    """``cudnn.deterministic = cfg.cudnn_deterministic`` (or ``use_deterministic_algorithms(
    args.deterministic)``) where the program fixes the switch to True: a dataclass default, a
    config literal every call passes, an option's default (:func:`resolve`). A switch left
    False, or one the program does not fix, asks for nothing."""
    out: list[ast.AST] = []
    for node in script.nodes:
        if isinstance(node, ast.Assign) and any(
                (dotted(t) or "").endswith("cudnn.deterministic") for t in node.targets):
            value: ast.AST | None = node.value
        elif isinstance(node, ast.Call) and node.args and (
                script.call_qualname(node) or "").endswith("use_deterministic_algorithms"):
            value = node.args[0]
        else:
            continue
        if isinstance(value, ast.expr) and not isinstance(value, ast.Constant) and \
                resolve(script, value) is True:
            out.append(node)
    return out


def _after_training(script: Script, node: ast.AST) -> bool:
    """``node`` runs only after the script's last training step: every top-level statement
    that runs it (the statement itself, or each call of the module-level function around it)
    comes after every top-level statement that trains, and none of them trains. Benchmark mode
    turned on for an inference speed measurement after training changes no trained weight
    (Alibaba-MIIL/TResNet#3: cuDNN autotuning warmed before timing)."""
    tops = _top_statements(script)
    func = script.enclosing_function(node)
    if func is None:
        runs = [s for s in tops if s is node or encloses(s, node)]
    else:
        sites = _top_level_sites(script, func)
        if sites is None:
            return False
        runs = [s for s in tops if any(encloses(s, c) for c in sites)]
    training = [s for s in tops if _trains(script, s, 3)]
    return bool(runs) and bool(training) and not any(s in training for s in runs) and \
        min(s.lineno for s in runs) > max(s.end_lineno or s.lineno for s in training)


def _top_level_sites(script: Script, func: ast.AST) -> list[ast.Call] | None:
    """The calls of ``func``, a module-level function (a ``__main__`` block's included), when
    there are some and all of them are top-level code; None otherwise."""
    if not (parent(func) is script.tree or any(is_main_guard(p) and func in p.body
                                               for p in script.tree.body)):
        return None
    sites = script.call_sites(func)
    if not sites or any(script.enclosing_function(c) is not None for c in sites):
        return None
    return sites


def _top_statements(script: Script) -> list[ast.stmt]:
    """The script's top-level statements, those of an ``if __name__ == "__main__":`` block
    in its place."""
    out: list[ast.stmt] = []
    for s in script.tree.body:
        out.extend(s.body if is_main_guard(s) else [s])
    return [s for s in out if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.ClassDef))]


def _trains(script: Script, node: ast.AST, depth: int) -> bool:
    """``node`` calls ``backward()`` or ``step()``, itself or through the file's functions."""
    for c in ast.walk(node):
        if not isinstance(c, ast.Call):
            continue
        if isinstance(c.func, ast.Attribute) and c.func.attr in ("backward", "step"):
            return True
        name = c.func.id if isinstance(c.func, ast.Name) else None
        if depth and name in script.functions and any(
                _trains(script, f, depth - 1) for f in script.functions[name]):
            return True
    return False


def _seeding_function(script: Script, node: ast.AST) -> ast.AST | None:
    """The function around ``node`` when it seeds torch and numpy or random unconditionally
    (a ``seed_everything``-style helper, whatever its name): its purpose is a run that
    repeats, which benchmark mode defeats. A branch choosing between speed and determinism
    (``if deterministic: ... else: benchmark = True``) is the user's choice and stays silent."""
    func = script.enclosing_function(node)
    if func is None or if_branches(node):
        return None
    calls = [c for c in walk_local(func) if isinstance(c, ast.Call) and not _guarded(c)]
    return func if _repeats(seeds_in(script, calls, depth=0)) else None


def _seeded_beside(script: Script, node: ast.AST) -> ast.Call | None:
    """The call beside ``node`` (in the same function, or at the top level of the script, a
    ``__main__`` block included) after which torch and numpy or random are seeded
    unconditionally, directly or through a helper it calls (``set_random_seeds(seed)`` from
    another file of the project): a run set up to repeat. None when ``node`` sits under
    another ``if``."""
    if _guarded(node):
        return None
    scope = script.enclosing_function(node) or script.tree
    seeded: set[str] = set()
    for call in sorted((n for n in walk_local(scope) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset)):
        if not _guarded(call):
            seeded |= seeds_in(script, [call], depth=1, local=True)
            for t in script.targets(call)[:2]:  # a helper of any name (``set_environment``)
                seeded |= seeds_in(t.script, [c for c in walk_local(t.func)
                                              if isinstance(c, ast.Call)], depth=0)
            if _repeats(seeded):
                return call
    return None


def _seeded_around_calls(script: Script, node: ast.AST) -> ast.Call | None:
    """``node`` sits unconditionally in a module-level function (not a seeding one) that only
    top-level code calls, and that code seeds the run (:func:`_seeded_beside` of each call):
    a speed-up helper called in a run set up to repeat."""
    func = script.enclosing_function(node)
    sites = _top_level_sites(script, func) if func is not None and not _guarded(node) else None
    if sites is None:
        return None
    seeded = [_seeded_beside(script, c) for c in sites]
    return seeded[0] if all(seeded) else None


def _turned_off_after(script: Script, node: ast.AST, flag: ast.AST) -> bool:
    """The deterministic ``flag`` sits in a function with ``benchmark = False`` beside it, and
    ``node`` (``benchmark = True``) is top-level code above every call of that function: the
    function turns benchmark mode off after it (OpenNMT's ``set_random_seed`` after a
    module-level speed-up)."""
    func = script.enclosing_function(flag)
    if func is None or script.enclosing_function(node) is not None or _guarded(node) or \
            not _benchmark_off_beside(flag):
        return False
    calls = [c for c in script.calls if any(t.func is func for t in script.targets(c))]
    return bool(calls) and all(c.lineno > node.lineno for c in calls)


def _benchmark_off_beside(flag: ast.AST) -> bool:
    """``cudnn.benchmark = False`` among the statements around the deterministic ``flag``."""
    stmt = flag
    while not isinstance(stmt, ast.stmt) and (p := parent(stmt)) is not None:
        stmt = p
    block = parent(stmt)
    body = next((b for b in (getattr(block, f, None) for f in ("body", "orelse", "finalbody"))
                 if isinstance(b, list) and stmt in b), [])
    return any(isinstance(n, ast.Assign) and is_false(n.value) and any(
        (dotted(t) or "").endswith("cudnn.benchmark") for t in n.targets) for n in body)


def _repeats(seeded: set[str]) -> bool:
    """Torch seeded, and numpy or random: every generator a training run draws from."""
    return "torch" in seeded and bool(seeded & {"numpy", "random"})


def _guarded(node: ast.AST) -> bool:
    """Under an ``if`` other than ``if __name__ == "__main__":``."""
    return any(not is_main_guard(n) for n in _ifs(node))


def _ifs(node: ast.AST) -> Iterator[ast.If]:
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, ast.If) and n is not p.test:
            yield p
        n = p

