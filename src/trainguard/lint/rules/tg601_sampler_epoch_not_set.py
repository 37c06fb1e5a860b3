"""TG601 sampler-epoch-not-set: ``DistributedSampler`` without ``set_epoch(epoch)``.

The sampler seeds its shuffle with ``seed + epoch``; without ``set_epoch`` every epoch uses the
same order (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
Reported where ``set_epoch`` goes: the first statement of the epoch loop's body (the loop around
the training loop, or around the call of the function that holds it), before the epoch's
bookkeeping and before any iterator over the loader is made (the order is drawn when the
iterator is created); the ``for`` inside the ``while`` of a generator that passes over
a loader again and again (``while True: for batch in loader: yield batch``); at the sampler when
there is none.
Silent for ``shuffle=False`` samplers (evaluation), when any ``set_epoch`` call is in the file,
when the file has no training loop (the epochs run elsewhere) and when the sampler is handed to a
helper other than ``DataLoader`` that is not a function or class of the file (code of the file
cannot call ``set_epoch``: the file has no such call).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_false, kwarg, parent
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG601"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch"
           for c in script.calls):
        return
    if not training_loops(script):
        return  # the epochs run elsewhere, where set_epoch may be called
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("DistributedSampler"):
            continue
        if is_false(kwarg(call, "shuffle")) or _handed_on(script, call):
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
    of each epoch before creating the DataLoader iterator"). The epoch loop is the nearest loop
    enclosing a training loop, or enclosing a call of the function that holds one."""
    for loop in training_loops(script):
        outer = script.enclosing_loops(loop)
        if outer:
            return outer[0].body[0]
        func = loop if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
            script.enclosing_function(loop)
        for site in script.call_sites(func) if func is not None else []:
            around = script.enclosing_loops(site)
            if around:
                return around[0].body[0]
    endless = _endless_pass(script)
    return next((f for f in endless.body if isinstance(f, (ast.For, ast.AsyncFor))), endless) \
        if endless is not None else None


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
