"""Draws from torch's generator made before the statement that seeds it.

``torch.manual_seed(seed)`` sets the generator's state: what was drawn before it (a model's
initial weights, ``torch.randn`` data) came from whatever state the generator was in, so the
seed does not govern it (https://pytorch.org/docs/stable/notes/randomness.html). In a function
run several times in one process (``main(args)`` twice with the same ``--seed``), each run's
model starts from different weights. Read in the body of a function called from two places or
from a loop (the module's own draws before its seed start from the generator's fixed start-up
state, which repeats from process to process):
the first statement that seeds torch, directly or through a seeding helper of the file, when
every seeding of torch in the file runs there or after it in that block; then the first
statement before it that builds a module with parameters (a layer, a container of layers, a
module class of the file, or a function of the file that returns one) or draws from torch.
A draw that picks the seed itself (``seed = torch.randint(...)``, then ``manual_seed(seed)``)
is no such draw; nor is one under ``torch.random.fork_rng()``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import walk_local
from trainguard.lint.callgraph import returned_values
from trainguard.lint.cuts import parametric
from trainguard.lint.repro import SEED_CALLS, seeds_in
from trainguard.lint.script import Script

__all__ = ["drawn_before_seed"]


def drawn_before_seed(script: Script, is_draw  # type: ignore[no-untyped-def]
                      ) -> Iterator[tuple[ast.AST, ast.Call]]:
    """(draw, seeding call) pairs; ``is_draw(call)`` says whether a call draws from torch's
    global generator (the rule's own test)."""
    direct = [c for c in script.calls
              if SEED_CALLS.get(script.call_qualname(c) or "") == "torch"]
    if not direct:
        return
    scopes = [f for fs in script.functions.values() for f in fs if _runs_again(script, f)]
    for scope in scopes:
        body = scope.body  # type: ignore[attr-defined]
        found = _first_seed(script, body)
        if found is None:
            continue
        k, seed = found
        covered = {id(c) for s in body[k:] for c in _calls(s)}
        for t in script.targets(seed):
            covered |= {id(c) for c in walk_local(t.func) if isinstance(c, ast.Call)}
        if any(id(c) not in covered for c in direct):
            continue  # torch is seeded elsewhere too: what runs before may be seeded there
        given = {n.id for a in [*seed.args, *(kw.value for kw in seed.keywords)]
                 for n in ast.walk(a) if isinstance(n, ast.Name)}
        for stmt in body[:k]:
            if isinstance(stmt, ast.Assign) and given & {
                    n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}:
                continue  # the draw picks the seed: ``seed = torch.randint(...)``
            draw = _draw(script, stmt, is_draw)
            if draw is not None:
                yield draw, seed
                break


def _runs_again(script: Script, func: ast.AST) -> bool:
    """``func`` runs more than once in the process: called from two places, or from a loop.
    (What the module draws before its first seed comes from the generator's fixed start-up
    state: the same in every process, so it repeats.)"""
    sites = script.call_sites(func)
    return len(sites) > 1 or any(script.enclosing_loops(c) for c in sites)


def _calls(stmt: ast.stmt) -> list[ast.Call]:
    """The calls ``stmt`` makes itself (not those of functions it defines)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    return [c for c in walk_local(stmt) if isinstance(c, ast.Call)]


def _first_seed(script: Script, body: list[ast.stmt]) -> tuple[int, ast.Call] | None:
    """The index of the first statement of ``body`` that is a call seeding torch, and that
    call (``torch.manual_seed(s)``, ``seed_everything(args.seed)`` whose body seeds torch)."""
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and "torch" in seeds_in(script, [call], depth=3,
                                                               local=True):
            return i, call
        if any("torch" in seeds_in(script, [c], depth=3, local=True) for c in _calls(stmt)):
            return None  # seeded inside a test or loop: the order is not that of the lines
    return None


def _draw(script: Script, stmt: ast.stmt, is_draw  # type: ignore[no-untyped-def]
          ) -> ast.AST | None:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                         ast.ImportFrom)):
        return None
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
            _builds_parametric(script, stmt.value):
        return stmt.value
    for c in _calls(stmt):
        if is_draw(c):
            return c
    return None


def _builds_parametric(script: Script, call: ast.Call) -> bool:
    """``call`` builds a module whose weights are drawn at construction: a layer with
    parameters, a container of them, a module class of the file, or a function of the file
    whose every return is one (``build_model()`` returning ``nn.Sequential(nn.Conv2d(...),
    ...)``)."""
    if parametric(script, call, 4):
        return True
    targets = [t for t in script.targets(call) if not t.instance]
    if len(targets) != 1 or targets[0].script is not script:
        return False
    values = returned_values(targets[0].func)
    return bool(values) and all(parametric(script, v, 4) for v in values)
