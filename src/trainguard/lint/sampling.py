"""Monte Carlo sampling: the same input passed through a model again and again.

A forward repeated on an input that does not change between passes returns the same output
every time, unless the model is stochastic on purpose: dropout left on at prediction time
(Monte Carlo dropout, Gal & Ghahramani 2016, "Dropout as a Bayesian Approximation"), the passes
collected and reduced to a mean and a spread. Train mode there is the point, not a slip
(https://github.com/TiagoCortinhal/SalsaNext/issues/40: without dropout at inference "the
variance will always be 0"). A pass counts as sampled when its nearest loop is counted
(``for _ in range(n)``, ``[model(x) for _ in range(n)]``), the loop's variable does not feed
the forward's inputs and nothing in the loop rebinds them (a rollout ``h = model(x, h)`` or a
generation loop changes its input), the inputs are plain values (no per-pass noise or
augmentation computed in the call), the loop runs no backward, and each pass's output is
collected whole: the element of a comprehension or appended to a list, through an output
activation at most (``model(x).softmax(-1)``).
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import COMPREHENSIONS, SCOPES, dotted, names_in, parent, walk_local
from trainguard.lint.script import Script, is_backward

__all__ = ["sampled_pass", "samples_only", "helper_samples"]

# what may wrap a pass's output and still leave the output itself collected
_KEEPS_OUTPUT = {"softmax", "log_softmax", "sigmoid", "exp", "detach", "cpu", "unsqueeze",
                 "squeeze", "float", "double", "clone", "numpy", "to", "view", "reshape",
                 "flatten", "tanh"}
# what an input may go through inside the call and stay the same input
_SAME_INPUT = {"to", "cuda", "float", "half", "double", "contiguous", "detach"}


def sampled_pass(script: Script, call: ast.Call) -> bool:
    """``call``, a forward, is one of several passes of the same input (see the module)."""
    inputs: set[str] = set()
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        for sub in ast.walk(arg):
            if isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Attribute) and
                                                  sub.func.attr in _SAME_INPUT):
                return False  # noise or an augmentation per pass: not the same input
        inputs |= names_in(arg)
    node: ast.AST = call
    while (up := parent(node)) is not None and not isinstance(up, SCOPES):
        if isinstance(up, COMPREHENSIONS):
            elt = up.value if isinstance(up, ast.DictComp) else up.elt
            return node is elt and _collects(elt, call) and all(
                _counted(g.iter) and not (names_in(g.target) & inputs) and not g.ifs
                for g in up.generators)
        if isinstance(up, (ast.For, ast.AsyncFor)) and node is not up.iter:
            return node in up.body and _counted(up.iter) and \
                not (names_in(up.target) & inputs) and \
                not _rebinds(up, inputs) and not _runs_backward(script, up) and \
                _appended(up, call)
        if isinstance(up, ast.While):
            return False
        node = up
    return False


def samples_only(script: Script, forwards: list[ast.Call]) -> bool:
    """Every forward in ``forwards`` (there is at least one) is a sampled pass."""
    return bool(forwards) and all(sampled_pass(script, f) for f in forwards)


def helper_samples(script: Script, call: ast.Call) -> bool:
    """``call`` hands a model to a project function whose forwards of it are all sampled
    passes (``mc_predict(model, x)`` running ``[model(x) for _ in range(30)]``)."""
    from trainguard.lint.callgraph import forwards_of, model_parameters

    found = model_parameters(script, call)
    if found is None:
        return False
    target, models = found
    return samples_only(target.script, forwards_of(target.func, models))


def _counted(it: ast.AST) -> bool:
    """A loop over a count, not over data: ``range(n)``, ``trange(n)``."""
    return isinstance(it, ast.Call) and (dotted(it.func) or "").rsplit(".", 1)[-1] in (
        "range", "trange") and not it.keywords


def _rebinds(loop: ast.AST, names: set[str]) -> bool:
    for sub in walk_local(loop):
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(names_in(t) & names for t in targets):
                return True
        elif isinstance(sub, (ast.For, ast.AsyncFor)) and sub is not loop and \
                names_in(sub.target) & names:
            return True
    return False


def _runs_backward(script: Script, loop: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and is_backward(c) for c in walk_local(loop)) or \
        script.has_backward(loop)


def _collects(expr: ast.AST, call: ast.Call) -> bool:
    """``expr`` is the pass's output itself, through output activations and moves at most."""
    while expr is not call:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr in _KEEPS_OUTPUT and not isinstance(expr.func.value, ast.Name):
            expr = expr.func.value  # model(x).softmax(-1)
        elif isinstance(expr, ast.Call) and expr.args and \
                (dotted(expr.func) or "").rsplit(".", 1)[-1] in _KEEPS_OUTPUT:
            expr = expr.args[0]  # F.softmax(model(x), dim=1)
        else:
            return False
    return True


def _appended(loop: ast.For | ast.AsyncFor, call: ast.Call) -> bool:
    """The loop appends the pass's output (or a name bound to it in the loop) to a list."""
    held: set[str] = set()
    for stmt in walk_local(loop):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name) and _collects(stmt.value, call):
            held.add(stmt.targets[0].id)
    for sub in walk_local(loop):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "append" and len(sub.args) == 1:
            arg = sub.args[0]
            if _collects(arg, call):
                return True
            inner = arg
            while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                    inner.func.attr in _KEEPS_OUTPUT:
                inner = inner.func.value
            if isinstance(inner, ast.Name) and inner.id in held:
                return True
    return False
