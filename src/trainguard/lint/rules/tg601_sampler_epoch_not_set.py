"""TG601 sampler-epoch-not-set: ``DistributedSampler`` without ``set_epoch(epoch)``.

The sampler seeds its shuffle with ``seed + epoch``; without ``set_epoch`` every epoch uses the
same order (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
Reported at the epoch loop (the loop around the training loop, or around the call of the
function that holds it), where ``set_epoch`` goes, or at a statement of the epoch that starts a
pass over the sampler before the training loop (``batches = iter(train_loader)``): the order is
drawn when the iterator is created; the ``while`` of a generator that passes over
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

from trainguard.lint.astutil import dotted, is_false, kwarg, parent
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script
from trainguard.placement import body_statement

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
            drawn = _first_draw(script, call, epoch_loop)
            first = "" if drawn is epoch_loop else \
                " (its pass over the sampler starts here, before the training loop)"
            yield Hit(drawn, f"the epoch loop never calls set_epoch() on the "
                             f"DistributedSampler built at {script.at(call.lineno)}, which "
                             f"shuffles with seed + epoch: every epoch sees the same order{first}",
                      fix="call sampler.set_epoch(epoch) at the start of every epoch")
        return


def _epoch_loop(script: Script) -> ast.AST | None:
    """Where ``set_epoch`` goes, in the loop around the training loop (``for epoch in
    range(...)``): the statement of its body that runs the pass (the training loop, or the call
    of the function that holds one: ``set_epoch`` goes right above it, after the epoch's
    bookkeeping; lucidrains/DALLE-pytorch#230). The epoch loop is the nearest loop enclosing a
    training loop, or enclosing a call of the function that holds one."""
    for loop in training_loops(script):
        outer = script.enclosing_loops(loop)
        if outer:
            return body_statement(outer[0].body, loop.lineno) or outer[0]
        func = loop if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
            script.enclosing_function(loop)
        for site in script.call_sites(func) if func is not None else []:
            around = script.enclosing_loops(site)
            if around:
                return body_statement(around[0].body, site.lineno) or around[0]
    endless = _endless_pass(script)
    return next((f for f in endless.body if isinstance(f, (ast.For, ast.AsyncFor))), endless) \
        if endless is not None else None


# Calls that start a pass over their argument: the sampler draws its order for the epoch there
_ITERATING = {"iter", "list", "tuple", "enumerate", "sorted", "zip"}
_WRAPPERS = {"iter", "enumerate", "tqdm", "islice", "cycle"}


def _first_draw(script: Script, sampler: ast.Call, at: ast.AST) -> ast.AST:
    """The first statement of the epoch loop's body above ``at`` that starts a pass over the
    sampler or a loader built on it (``batches = iter(train_loader)``,
    ``list(loader.sampler)``): the sampler fixes the epoch's order when its iterator is
    created, so ``set_epoch`` must come before that (the DistributedSampler docs: "before
    creating the DataLoader iterator"); ``at`` when there is none."""
    loop = parent(at)
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or at not in loop.body:
        return at
    names = {dotted(t) for t in _targets(sampler)}
    names |= {dotted(t) for c in script.calls if (script.call_qualname(c) or "").endswith(
        "DataLoader") and dotted(kwarg(c, "sampler")) in names for t in _targets(c)}
    if isinstance(at, (ast.For, ast.AsyncFor)):
        names.add(dotted(_unwrapped(at.iter)))  # the loader the training loop passes over
    names.discard(None)
    names |= {f"{n}.sampler" for n in names}
    for stmt in loop.body[:loop.body.index(at)]:
        for n in ast.walk(stmt):
            over = n.iter if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) else \
                n.args[0] if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in _ITERATING and n.args else None
            if over is not None and dotted(_unwrapped(over)) in names:
                return stmt
    return at


def _targets(call: ast.AST) -> list[ast.expr]:
    p = parent(call)
    return list(p.targets) if isinstance(p, ast.Assign) and p.value is call else []


def _unwrapped(node: ast.expr) -> ast.expr:
    """``loader`` for ``enumerate(loader)``, ``tqdm(loader)`` or ``iter(loader)`` (not for
    ``range(len(loader))``, which passes over no sampler)."""
    while isinstance(node, ast.Call) and node.args and \
            (dotted(node.func) or "").rsplit(".", 1)[-1] in _WRAPPERS:
        node = node.args[0]
    return node


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
