"""Batches a script slices by hand: ``for i in range(0, len(x), bs): xb = x[i:i + bs]``.

Such a loop has no ``drop_last``: when the number of samples leaves a remainder of one, its last
batch is one sample. :func:`sliced_batch_loops` finds ``for`` loops over ``range(start, stop,
step)`` whose body slices from the loop variable (``x[i:i + step]``), with ``stop`` the length of
something whose samples the file fixes (``len(volumes)``, ``x.shape[0]``, ``x.size(0)``, a
number) and ``step`` a batch size the file fixes, under each call site's arguments when they are
the function's parameters (``volume_batches(volumes, labels, bs=5)``). Such a loop feeds training
when it is a training loop itself or runs in a generator that a training loop iterates.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, parent, walk_local
from trainguard.lint.callgraph import bind_arguments, defaults
from trainguard.lint.consts import UNKNOWN, _single_value, const_eval, resolve
from trainguard.lint.regions import training_loops
from trainguard.lint.script import Script
from trainguard.lint.shapes import samples

__all__ = ["single_sample_loops", "site_envs", "sliced_batch_loops"]


def _slicing_loops(script: Script) -> Iterator[ast.For]:
    """The hand-slicing loops over ``range(start, stop, step)`` that feed training."""
    trains = {id(loop) for loop in training_loops(script)}
    for loop in script.nodes:
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and
                _range3(loop.iter) and _slices_from(loop, loop.target.id)):
            continue
        func = script.enclosing_function(loop)
        if id(loop) in trains or _generator_feeding_training(script, func, trains):
            yield loop


def single_sample_loops(script: Script
                        ) -> Iterator[tuple[ast.For, ast.expr, dict, ast.Call | None]]:
    """``(loop, step, the call site's bindings, call site or None)`` for each hand-slicing
    loop that feeds training one sample at a time: its step is 1 under the file's values
    (``cfg["batch_size"]`` with ``"batch_size": 1``) and its body slices the first dimension
    by that step (``x[i:i + bs]``), so every batch holds one sample, whatever their number."""
    for loop in _slicing_loops(script):
        step = loop.iter.args[2]  # type: ignore[attr-defined]
        var = loop.target.id  # type: ignore[attr-defined]
        if not any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice) and
                   _step_ahead(n.slice, var, step) for stmt in loop.body for n in ast.walk(stmt)):
            continue
        for env, site in site_envs(script, loop.iter):
            size = _value(script, step, env)
            if size == 1 and not isinstance(size, bool):
                yield loop, step, env, site
                break


def _step_ahead(part: ast.Slice, var: str, step: ast.expr) -> bool:
    """``i:i + step``: a slice from the loop variable as long as the step."""
    upper = part.upper
    return isinstance(part.lower, ast.Name) and part.lower.id == var and \
        isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add) and \
        isinstance(upper.left, ast.Name) and upper.left.id == var and \
        ast.dump(upper.right) == ast.dump(step)


def sliced_batch_loops(script: Script) -> Iterator[tuple[ast.For, int, int, ast.Call | None]]:
    """``(loop, samples, batch size, call site or None)`` for each hand-slicing loop that feeds
    training and whose last batch is one sample."""
    for loop in _slicing_loops(script):
        start, stop, step = loop.iter.args  # type: ignore[attr-defined]
        for env, site in site_envs(script, loop.iter):
            n, size = _length(script, stop, env), _value(script, step, env)
            first = _value(script, start, env)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, size, first)):
                continue
            if size > 1 and n > first and (n - first) % size == 1:
                yield loop, n - first, size, site
                break


def _range3(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "range" and len(node.args) == 3 and not node.keywords


def _slices_from(loop: ast.For, var: str) -> bool:
    """The body slices something from the loop variable: ``x[i:i + bs]``, ``order[i:i + bs]``."""
    return any(isinstance(n, ast.Slice) and isinstance(n.lower, ast.Name) and n.lower.id == var
               for stmt in loop.body for n in ast.walk(stmt))


def _generator_feeding_training(script: Script, func: ast.AST | None, trains: set[int]) -> bool:
    """``func`` yields, and a training loop iterates one of its calls (``for x, y in
    batches(...)``, also through ``enumerate``/``zip``)."""
    if func is None or not any(isinstance(n, (ast.Yield, ast.YieldFrom))
                               for n in walk_local(func)):
        return False
    for site in script.call_sites(func):  # type: ignore[arg-type]
        node: ast.AST | None = site
        while node is not None and not isinstance(node, (ast.For, ast.stmt)):
            node = parent(node)
        if isinstance(node, ast.For) and id(node) in trains and \
                any(n is site for n in ast.walk(node.iter)):
            return True
    return False


def site_envs(script: Script, node: ast.AST) -> list[tuple[dict, ast.Call | None]]:
    """The bindings ``node``'s names are evaluated under (a DataLoader's arguments, a range's
    bounds): none at module level or in a function whose parameters it does not read, else each
    call site's arguments over the parameters' defaults (up to 8 sites)."""
    func = script.enclosing_function(node)
    if func is None:
        return [({}, None)]
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    used = {n.id for n in walk_local(node) if isinstance(n, ast.Name)} & set(params)
    if not used:
        return [({}, None)]
    if params and params[0] == "self":
        params = params[1:]
    given = defaults(func)
    out = []
    for site in _sites(script, func)[:8]:
        env = dict(given)
        env.update(bind_arguments(params, site))
        out.append((env, site))
    return out


def _sites(script: Script, func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
    """The calls that run ``func``: for ``__init__``, the instantiations of its class
    (``Learner(cfg, train_ds)`` runs ``Learner.__init__``)."""
    cls = script.enclosing_class(func)
    if cls is None or func.name != "__init__":
        return script.call_sites(func)
    return [c for c in script.calls if (dotted(c.func) or "").rsplit(".", 1)[-1] == cls.name
            and (ref := script.graph.class_named(dotted(c.func))) is not None
            and ref.node is cls]


def _value(script: Script, node: ast.AST, env: dict) -> object:
    v = const_eval(node, env=env)
    if v is UNKNOWN and isinstance(node, ast.Name) and node.id in env:
        v = resolve(script, env[node.id])
    return resolve(script, node) if v is UNKNOWN else v


def _length(script: Script, node: ast.AST, env: dict, depth: int = 2) -> object:
    """The number a ``range`` stops at: ``len(x)``, ``x.shape[0]``, ``x.size(0)``, a number,
    or a local name assigned one of those once (``n = len(volumes)``); a parameter, what the
    call site passes for it (``batches(len(train_x), 32)`` over ``range(0, n, batch_size)``)."""
    if isinstance(node, ast.Name) and env and isinstance(env.get(node.id), ast.expr) and \
            depth > 0:
        return _length(script, env[node.id], {}, depth - 1)
    if isinstance(node, ast.Name) and not (env and node.id in env):
        held = _single_value(node)
        if held is not None and depth > 0:
            return _length(script, held, env, depth - 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "len" and len(node.args) == 1:
        return samples(script, node.args[0], env)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "shape" and const_eval(node.slice) == 0:
        return samples(script, node.value.value, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "size" and len(node.args) == 1 and const_eval(node.args[0]) == 0:
        return samples(script, node.func.value, env)
    return _value(script, node, env)
