"""Copies of a model (an EMA or SWA average, a best-so-far snapshot) and the mode they run in.

``copy.deepcopy(model)`` and ``torch.optim.swa_utils.AveragedModel(model)`` (which deep-copies
the module: https://pytorch.org/docs/stable/optim.html#weight-averaging-swa-and-ema) give a
separate module whose ``training`` flag is the one ``model`` had at the copy; ``model.eval()``
and ``model.train()`` afterwards do not reach it
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval sets the
flag on the module it is called on and its children only). A copy made while the model trains,
whose mode the program never sets, runs every later forward in train mode.

:func:`train_mode_copy_forwards` gives the forwards of such a copy that evaluate it: outside
every training iteration, and not in a function that calls backward. A copy whose mode the file
sets anywhere (on the copy, on an object that holds it, or ``self.train(...)``/``self.eval()`` in
the class that holds it) is left out, except ``m.train(was)`` with ``was = m.training``, which
restores the mode it read. A forward in the training iteration (a mean teacher, a momentum
encoder run in train mode on purpose) is none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from trainguard.lint.module_methods import runs_layers
from trainguard.lint.script import Script

__all__ = ["CopyForward", "train_mode_copy_forwards"]

_COPIES = ("copy.deepcopy", "torch.optim.swa_utils.AveragedModel")


@dataclass(frozen=True, slots=True)
class CopyForward:
    forward: ast.Call
    key: str  # the copy, as the forward names it
    made: ast.Call  # the deepcopy / AveragedModel call
    source: str  # the model copied
    why: str  # why the model was in train mode at the copy


def train_mode_copy_forwards(script: Script) -> Iterator[CopyForward]:
    if not any(c in script.source for c in ("deepcopy", "AveragedModel")):
        return
    from trainguard.lint.regions import training_loops

    for key, values in script.assignments.items():
        made = values[0] if len(values) == 1 else None
        if key == "self" or not isinstance(made, ast.Call) or not made.args or \
                script.call_qualname(made) not in _COPIES:
            continue
        source = script.key(made.args[0])
        if not source or not script.is_model(source):
            continue
        owner = script.enclosing_class(made) if key.startswith("self.") else None
        holders = _instances(script, owner) if owner is not None else set()
        if _mode_set(script, key, owner, holders):
            continue
        forwards = list(_forwards(script, key, owner, holders))
        if not forwards:
            continue
        mode, why = _mode_at_copy(script, made, owner, holders)
        if mode != "train":
            continue
        loops = training_loops(script)
        for fwd in forwards:
            if _evaluates(script, fwd, loops):
                yield CopyForward(fwd, script.key(fwd.func) or key, made, source, why)


def _mode_at_copy(script: Script, made: ast.Call, owner: ast.ClassDef | None,
                  holders: set[str]) -> tuple[str, str]:
    """The mode of the model copied, at the copy; a copy in ``__init__`` is made where the
    class is instantiated (train at any of them is train)."""
    from trainguard.lint.modes import mode_before

    mode, why = mode_before(script, made)
    func = script.enclosing_function(made)
    if mode != "unknown" or owner is None or func is None or func.name != "__init__":
        return mode, why
    for k in sorted(holders):
        for v in script.assignments.get(k, []):
            if isinstance(v, ast.Call):
                mode, why = mode_before(script, v)
                handed = _handed(script, made, v)
                if mode == "unknown" and handed is not None:
                    mode, why = _fresh(script, handed, v)
                if mode == "train":
                    return mode, f"{why}; {owner.name}() is built at {script.at(v.lineno)}"
    return "unknown", ""


def _handed(script: Script, made: ast.Call, site: ast.Call) -> ast.expr | None:
    """The argument ``site`` (an instantiation) passes for the ``__init__`` parameter that
    ``made`` copies."""
    init = script.enclosing_function(made)
    name = made.args[0].id if isinstance(made.args[0], ast.Name) else None
    params = [a.arg for a in init.args.args[1:]] if init is not None else []
    if name not in params:
        return None
    i = params.index(name)
    if i < len(site.args):
        return site.args[i]
    return next((k.value for k in site.keywords if k.arg == name), None)


def _fresh(script: Script, model: ast.expr, site: ast.AST) -> tuple[str, str]:
    """Train when ``model`` (handed over at ``site``) is a name bound once, earlier in the
    same scope, to a newly built ``torch.nn`` module, with no mode call on it before ``site``."""
    from trainguard.lint.events import builds_module

    at = getattr(site, "lineno", 0)
    key = script.key(model)
    values = script.assignments.get(key or "", [])
    if len(values) != 1 or not isinstance(values[0], ast.Call) or values[0].lineno >= at or \
            script.enclosing_function(values[0]) is not script.enclosing_function(site):
        return "unknown", ""
    built = values[0]
    if not ((script.call_qualname(built) or "").startswith("torch.nn.") or
            builds_module(script, built)):
        return "unknown", ""
    if any(isinstance(c.func, ast.Attribute) and c.func.attr in ("train", "eval") and
           script.key(c.func.value) == key and c.lineno < at for c in script.calls):
        return "unknown", ""
    return "train", f"modules start in train mode; {key} is built at {script.at(built.lineno)}"


def _instances(script: Script, cls: ast.ClassDef) -> set[str]:
    """Keys bound to an instance of ``cls``."""
    return {k for k, vs in script.assignments.items()
            if any(isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and
                   v.func.id == cls.name for v in vs)}


def _receivers(script: Script, key: str, owner: ast.ClassDef | None,
               holders: set[str]) -> Iterator[tuple[ast.Call, str]]:
    """``(call, receiver key)`` for calls on the copy: ``self.ema(...)`` inside its class,
    ``holder.ema(...)`` outside, ``ema(...)`` for a plain name."""
    attr = key.split(".", 1)[1] if owner is not None else None
    for call in script.calls:
        f = call.func
        recv = f.value if isinstance(f, ast.Attribute) else f
        for node in (f, recv):
            k = script.key(node)
            if k is None:
                continue
            if owner is None and k == key or owner is not None and (
                    k == key and script.enclosing_class(call) is owner or
                    "." in k and k.split(".", 1)[1] == attr and k.split(".", 1)[0] in holders):
                yield call, k
                break


def _mode_set(script: Script, key: str, owner: ast.ClassDef | None, holders: set[str]) -> bool:
    for call, k in _receivers(script, key, owner, holders):
        f = call.func
        if isinstance(f, ast.Attribute) and script.key(f.value) == k and \
                f.attr in ("train", "eval") and not _restores(script, call, k):
            return True
    for call in script.calls:  # the holder's own mode: ema.eval(), self.train(False)
        f = call.func
        if not (isinstance(f, ast.Attribute) and f.attr in ("train", "eval")):
            continue
        k = script.key(f.value)
        if k in holders or owner is not None and k == "self" and \
                script.enclosing_class(call) is owner:
            return True
    return False


def _restores(script: Script, call: ast.Call, key: str) -> bool:
    """``m.train(was)`` with ``was = m.training`` (or ``m.train(m.training)``): the mode read
    before is put back, nothing changes."""
    if call.func.attr != "train" or len(call.args) != 1:  # type: ignore[attr-defined]
        return False
    arg = call.args[0]
    if isinstance(arg, ast.Name):
        from trainguard.lint.consts import _single_value

        arg = _single_value(arg)  # type: ignore[assignment]
    return isinstance(arg, ast.Attribute) and arg.attr == "training" and \
        script.key(arg.value) == key


def _forwards(script: Script, key: str, owner: ast.ClassDef | None,
              holders: set[str]) -> Iterator[ast.Call]:
    for call, k in _receivers(script, key, owner, holders):
        f = call.func
        if script.key(f) == k or isinstance(f, ast.Attribute) and f.attr == "forward" or \
                runs_layers(script, call):
            yield call


def _evaluates(script: Script, fwd: ast.Call, loops: list[ast.AST]) -> bool:
    """``fwd`` runs outside every training iteration: itself, or (in a function) at every
    call site of its function, which calls no backward."""
    func = script.enclosing_function(fwd)
    sites: list[ast.AST] = [fwd]
    if func is not None:
        if script.has_backward(func) or func in loops:
            return False
        sites = list(script.call_sites(func))
    return bool(sites) and not any(_in_iteration(script, s, loops) for s in sites)


def _in_iteration(script: Script, node: ast.AST, loops: list[ast.AST]) -> bool:
    """``node`` is inside an innermost training loop, or in a step function."""
    func = script.enclosing_function(node)
    if func is not None and func in loops:
        return True
    around = {id(p) for p in script.enclosing_loops(node)}
    for loop in loops:
        if id(loop) in around and not any(
                other is not loop and id(loop) in {id(p) for p in script.enclosing_loops(other)}
                for other in loops):
            return True
    return False
