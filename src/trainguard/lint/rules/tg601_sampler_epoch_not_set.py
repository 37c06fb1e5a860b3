"""TG601 sampler-epoch-not-set: ``DistributedSampler`` without ``set_epoch(epoch)``.

The sampler seeds its shuffle with ``seed + epoch``; without ``set_epoch`` every epoch uses the
same order (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
Reported where ``set_epoch`` goes: the first statement of the epoch loop's body (the loop around
the training loop, or around the call of the function that holds it), before the epoch's
bookkeeping and before any iterator over the loader is made (the order is drawn when the
iterator is created); the ``for`` inside the ``while`` of a generator that passes over
a loader again and again (``while True: for batch in loader: yield batch``); at the sampler when
there is none.
Silent for ``shuffle=False`` samplers (evaluation), for a sampler built anew in every epoch with
a seed that changes with it (``DistributedSampler(data, seed=epoch)``), when the file has no
training loop (the epochs run elsewhere) and when the sampler is handed to a helper other than
``DataLoader`` that is not a function or class of the file (code of the file cannot call
``set_epoch``: the file has no such call).

A ``set_epoch`` call the file does make can still leave the order fixed: one made once, above
the epoch loop of its function (``sampler.set_epoch(start_epoch)`` then ``for epoch in ...``),
and one in the epoch loop whose argument the loop never changes (``set_epoch(0)``,
``set_epoch(args.start_epoch)``). Reported at that call, unless another ``set_epoch`` call of
the file runs every epoch with a value that may change.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, encloses, is_false, kwarg, parent
from trainguard.lint.dataflow import scope_of
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG601"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    set_epochs = [c for c in script.calls
                  if isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch"]
    if not training_loops(script):
        return  # the epochs run elsewhere, where set_epoch may be called
    if set_epochs:
        yield from _fixed_set_epoch(script, set_epochs)
        return
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("DistributedSampler"):
            continue
        if is_false(kwarg(call, "shuffle")) or _handed_on(script, call) or \
                _reseeded(script, call, _epoch_loops(script)):
            continue
        epoch_loop = _epoch_loop(script)
        if epoch_loop is None:
            yield Hit(call, "DistributedSampler shuffles with seed + epoch, but set_epoch() is "
                            "never called: every epoch sees the same order",
                      fix="call sampler.set_epoch(epoch) at the start of every epoch")
        else:
            yield Hit(epoch_loop, f"the epoch loop never calls set_epoch() on the "
                                  f"DistributedSampler built at {script.at(call.lineno)}, which "
                                  "shuffles with seed + epoch: every epoch sees the same order",
                      fix="call sampler.set_epoch(epoch) here, at the start of every epoch")
        return


def _epoch_loop(script: Script) -> ast.AST | None:
    """Where ``set_epoch`` goes: the first statement of the body of the loop around the training
    loop (``for epoch in range(...)``), the start of the epoch, before the epoch's bookkeeping and
    before any iterator over the loader is made (the DistributedSampler docs: "at the beginning
    of each epoch before creating the DataLoader iterator")."""
    loops = _epoch_loops(script)
    if loops:
        return loops[0].body[0]  # type: ignore[attr-defined]
    endless = _endless_pass(script)
    return next((f for f in endless.body if isinstance(f, (ast.For, ast.AsyncFor))), endless) \
        if endless is not None else None


def _epoch_loops(script: Script) -> list[ast.AST]:
    """The epoch loops, first found first: the nearest loop enclosing a training loop, or
    enclosing a call of the function that holds one."""
    out: list[ast.AST] = []
    for loop in training_loops(script):
        outer = script.enclosing_loops(loop)
        func = loop if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
            script.enclosing_function(loop)
        if not outer:
            outer = next((script.enclosing_loops(site) for site in (
                script.call_sites(func) if func is not None else [])
                if script.enclosing_loops(site)), [])
        if outer and not any(o is outer[0] for o in out):
            out.append(outer[0])
    return out


def _fixed_set_epoch(script: Script, calls: list[ast.Call]) -> Iterator[Hit]:
    """A ``set_epoch`` call that leaves every epoch's order the same: made once, above the
    epoch loop of its own function, or in an epoch loop with a value the loop never changes.
    Silent when any other ``set_epoch`` call of the file runs every epoch with a value that may
    change, and for a receiver that is no shuffling ``DistributedSampler``."""
    loops = _epoch_loops(script)
    found = []
    for call in calls:
        arg = call.args[0] if call.args else kwarg(call, "epoch")
        inside = next((lp for lp in loops if encloses(lp, call)), None)
        if inside is not None and arg is not None and _invariant(script, arg, inside):
            found.append((call, inside, "runs in every pass of the epoch loop at {} with a "
                                        "value that loop never changes"))
            continue
        later = _later_epoch_loop(script, call, loops)
        if later is None:
            return  # set every epoch (or the file cannot tell): the order may change
        found.append((call, later, "runs once, before the epoch loop at {}, and no call "
                                   "sets the epoch inside it"))
    for call, loop, how in found:
        if not _shuffling_sampler(script, call.func.value):  # type: ignore[attr-defined]
            continue
        yield Hit(call, f"{ast.unparse(call)} {how.format(script.at(loop.lineno))}: "
                        f"DistributedSampler shuffles with seed + epoch, so every epoch sees "
                        f"the same order",
                  fix="call sampler.set_epoch(epoch) at the start of every epoch, with the "
                      "epoch of that pass")
        return


def _later_epoch_loop(script: Script, call: ast.Call, loops: list[ast.AST]) -> ast.AST | None:
    """The epoch loop below ``call`` in the same function (or module), ``call`` in no loop:
    it runs once before all the epochs. None when the function holding ``call`` is itself
    called in a loop (once per stage)."""
    func = script.enclosing_function(call)
    if script.enclosing_loops(call) or func is not None and any(
            script.enclosing_loops(s) for s in script.call_sites(func)):
        return None
    return next((lp for lp in loops if scope_of(lp) is scope_of(call) and
                 lp.lineno > call.lineno), None)


_PLAIN = (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.operator,
          ast.unaryop, ast.Load)


def _invariant(script: Script, value: ast.expr, loop: ast.AST) -> bool:
    """``value`` is the same in every pass of ``loop``: built of constants and names the loop
    never stores (not its target, not assigned in its body; an attribute is stored nowhere but
    in an ``__init__`` or above the loop), with no call or subscript that could differ."""
    if not all(isinstance(n, _PLAIN) for n in ast.walk(value)):
        return False
    keys = {dotted(n) for n in ast.walk(value) if isinstance(n, (ast.Name, ast.Attribute))
            and not isinstance(parent(n), ast.Attribute)}
    if any(isinstance(n, ast.Global) and keys & set(n.names) for n in script.nodes):
        return False
    for node in script.nodes:
        targets = _stored(node)
        if not keys & {dotted(t) for t in targets}:
            continue
        if encloses(loop, node) or node is loop:
            return False
        func = script.enclosing_function(node)
        if any("." in (k or "") for k in keys) and func is not None and \
                func.name != "__init__" and func is not script.enclosing_function(loop):
            return False  # an attribute set by a method that the loop may call
    return True


def _stored(node: ast.AST) -> list[ast.AST]:
    """The expressions ``node`` stores into."""
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [node.optional_vars]
    return []


def _shuffling_sampler(script: Script, recv: ast.expr) -> bool:
    """``recv`` is a shuffling ``DistributedSampler``: built so in the file under its name, or,
    held under a name the file does not build (``loader.sampler``, a parameter), while the file
    builds one that shuffles."""
    built = [v for v in script.assignments.get(script.key(recv) or "", [])
             if isinstance(v, ast.Call)]
    samplers = [c for c in (built or script.calls)
                if (script.call_qualname(c) or "").endswith("DistributedSampler")]
    return any(not is_false(kwarg(c, "shuffle")) for c in samplers) and \
        (not built or len(samplers) == len(built))


def _reseeded(script: Script, sampler: ast.Call, loops: list[ast.AST]) -> bool:
    """A sampler built anew in every epoch with a seed that changes with it
    (``DistributedSampler(data, seed=epoch)``): each epoch's order differs."""
    seed = kwarg(sampler, "seed") or (sampler.args[4] if len(sampler.args) > 4 else None)
    return seed is not None and any(
        encloses(lp, sampler) and not _invariant(script, seed, lp) for lp in loops)


def _endless_pass(script: Script) -> ast.AST | None:
    """``while True: for batch in loader: yield batch`` (an infinite sampler of batches, as in
    StyleGAN's ``sample_data``): each pass of the ``while`` is an epoch of the loader."""
    for node in script.nodes:
        if isinstance(node, ast.While) and any(
                isinstance(f, (ast.For, ast.AsyncFor)) and any(
                    isinstance(y, (ast.Yield, ast.YieldFrom)) for y in ast.walk(f))
                for f in node.body):
            return node
    return None


def _handed_on(script: Script, sampler: ast.Call) -> bool:
    """The sampler is passed to a call other than DataLoader (a helper may call set_epoch)."""
    p = parent(sampler)
    if not isinstance(p, ast.Assign):
        return False
    names = {t.id for t in p.targets if isinstance(t, ast.Name)}
    for call in script.calls:
        if (script.call_qualname(call) or "").endswith("DataLoader"):
            continue
        cls = script.classes.get(call.func.id) if isinstance(call.func, ast.Name) else None
        if cls is not None and all(isinstance(b, ast.Name) and (
                b.id == "object" or b.id in script.classes) for b in cls.bases):
            continue  # Trainer(loader, sampler, ...): the file's own class (no set_epoch here)
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name) and arg.id in names:
                targets = script.targets(call)
                # a function of this file cannot call set_epoch: the file has no such call
                if not targets or any(t.script is not script for t in targets):
                    return True
    return False
