"""TG306 clip-before-unscale: with a ``GradScaler``, gradients clipped before ``unscale_``.

Gradients from ``scaler.scale(loss).backward()`` are multiplied by the loss scale (65536 at
first); clipping them before ``scaler.unscale_(optimizer)`` applies the threshold to the scaled
values (https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping). The clip
may be a function the step was handed (``clip_fn(params)``, ``self.grad_clip_fn`` given as
``functools.partial(clip_grad_norm_, max_norm=1.0)``: :mod:`trainguard.lint.held_calls`), and
the backward and step may run in a callback or an engine object the loop reaches. When an
``unscale_`` follows the clip in the step, the finding is where the two are put in that order:
the statement, in the function that runs both, whose call leads to the clip. A
``clip_grad_norm_`` that is a method of a project class (a mixed-precision helper's own) is
read through its body, which may unscale first (:func:`trainguard.lint.events.events`). A backward
of a loss that is plainly not scaled (``criterion(out, y).backward()``, a name assigned only
from such calls) leaves unscaled gradients: a step without the scaler in the same loop stays
silent. A scaler built disabled (``GradScaler(enabled=False)``, a flag the file fixes False,
or ``enabled=(dtype == torch.float16)`` after an ``if dtype == torch.float16: raise``) returns
the loss unchanged from ``scale()``: its gradients are never scaled (:func:`_disabled`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import (encloses, exclusive, kwarg, parent, statement_of,
                                     walk_local)
from trainguard.lint.consts import module_constants_trusted, truth
from trainguard.lint.events import events
from trainguard.lint.held_calls import local_assignments
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG306"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    scalers = {k for k in script.scalers if not all(
        _disabled(script, v) for v in script.assignments.get(k, ())
        if (script.call_qualname(v) or "").endswith("GradScaler"))}
    if not scalers:
        return
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        # the scaler may be reached from a callback through the object that holds it
        # (``runner.scaler.step(...)`` for the trainer's ``self.scaler``)
        held = {k.rsplit(".", 1)[-1] for k in scalers}
        uses_scaler = any(e.kind == "step" and (
            (script.key(e.node.func.value) or "") in scalers or  # type: ignore
            (script.key(e.node.func.value) or "").rsplit(".", 1)[-1] in held)  # type: ignore
            for e in evs)
        if not uses_scaler:
            continue
        unscaled, last = False, None
        for i, e in enumerate(evs):
            if e.kind == "backward":
                # a backward in the other branch of an ``if`` (``if scaler: ... else:
                # loss.backward()``): after it, the gradients are unscaled only if they are
                # on both paths; the branch that leaves out the other's ``scaler.scale(loss)``
                # runs a plain backward
                both = last is not None and exclusive(last, e.node)
                plain = _plain_backward(script, e.node) or both and _unscaled_twin(last, e.node)
                unscaled = (unscaled and plain) if both else plain
                last = e.node
            elif e.kind == "unscale":
                unscaled = True
            elif e.kind == "clip" and not unscaled:
                later = next((u for u in evs[i + 1:] if u.kind == "unscale"), None)
                at = _misordered(script, loop.body, e.node, 3) or e.node  # type: ignore
                where = "" if later is None or e.foreign else \
                    f", and unscale_ runs only after it ({later.place(script)})"
                yield Hit(e.site if e.foreign or later is None else at,
                          f"gradients are clipped while still multiplied by the GradScaler's "
                          f"loss scale{where}: the threshold applies to scaled gradients",
                          fix="call scaler.unscale_(optimizer) before clipping")
                break


def _misordered(script: Script, body: list[ast.stmt], clip: ast.AST, depth: int
                ) -> ast.AST | None:
    """Where the clip is put before ``unscale_``: in the function that runs both, one after the
    other (``self.clip_gradients()`` then ``self.precision.pre_optimizer_step(opt)`` in
    ``run_batch``), the statement's call that leads to the clip; the clip itself when it sits
    beside the ``unscale_``. Followed from ``body`` down the calls that reach both (the loop's
    ``self.run_batch(batch)``); None when no ``unscale_`` follows the clip."""
    evs = events(script, body)
    at = next((i for i, e in enumerate(evs) if e.node is clip and e.kind == "clip"), None)
    later = next((u for u in evs[at + 1:] if u.kind == "unscale"), None) \
        if at is not None else None
    if later is None or evs[at].foreign:  # type: ignore[index]
        return None
    via = evs[at].via  # type: ignore[index]
    if via is None or _dispatched(script, via, clip, 3):
        return clip  # (a callback's hook the call fires: the hook chosen is the fault)
    if later.via is not via or depth <= 0:
        return via  # the clip comes through this call, the unscale_ after it
    for target in _bodies(script, via):  # both through one call: the order is in there
        found = _misordered(script, target.body, clip, depth - 1)
        if found is not None:
            return found
    return via


def _bodies(script: Script, call: ast.Call) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [t.func for t in script.targets(call)[:4] if t.script is script and
            isinstance(t.func, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _dispatched(script: Script, via: ast.Call, clip: ast.AST, depth: int) -> bool:
    """The clip is reached from ``via`` through a call that fires a hook of every callback
    (``getattr(cb, name)(self)`` or ``cb.on_after_backward(self)`` inside ``for cb in
    self.callbacks:``): that call serves every callback, so the hook the clip was put in is
    what to change, not the line that fires it."""
    for func in _bodies(script, via) if depth > 0 else []:
        if encloses(func, clip):
            return False
        calls = [c for c in walk_local(func) if isinstance(c, ast.Call)]
        leading = [c for c in calls if _leads(script, c, clip, depth - 1)]
        if leading:  # the path to the clip goes on through calls the file resolves
            return any(_dispatched(script, c, clip, depth - 1) for c in leading)
        return any(_fires_hook(c) for c in calls)  # reached only by firing a hook
    return False


def _leads(script: Script, call: ast.Call, clip: ast.AST, depth: int) -> bool:
    """A function ``call`` runs holds the clip, or calls one that does."""
    return depth >= 0 and any(
        encloses(f, clip) or any(isinstance(c, ast.Call) and _leads(script, c, clip, depth - 1)
                                 for c in walk_local(f))
        for f in _bodies(script, call))


def _fires_hook(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "getattr":
        return True
    recv = f.value if isinstance(f, ast.Attribute) else None
    n = parent(call)
    while isinstance(recv, ast.Name) and n is not None and \
            not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and \
                isinstance(n.target, ast.Name) and n.target.id == recv.id:
            return True
        n = parent(n)
    return False


def _disabled(script: Script, call: ast.AST) -> bool:
    """``GradScaler(enabled=flag)`` with ``flag`` False wherever the scaler is built: its
    ``scale(loss)`` returns ``loss`` and ``unscale_``/``step`` do nothing more than a plain step
    (https://pytorch.org/docs/stable/amp.html#gradient-scaling). False by the file's constants
    (``enabled=False``, ``USE_FP16 = False``), or because the same test, checked above in the
    same block, leaves the run (``if amp_dtype == torch.float16: raise SystemExit(...)``) and
    nothing rebinds its names in between."""
    flag = kwarg(call, "enabled") if isinstance(call, ast.Call) else None
    if flag is None:
        return False
    if module_constants_trusted(script.tree, script.source) and truth(flag) is False:
        return True
    names = {n.id for n in ast.walk(flag) if isinstance(n, ast.Name)}
    stmt = statement_of(call)
    while stmt is not None and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        body = next((b for b in (getattr(parent(stmt), f, None) for f in
                                 ("body", "orelse", "finalbody")) if isinstance(b, list)
                     and stmt in b), None)
        if body is None:
            return False
        for earlier in reversed(body[:body.index(stmt)]):
            if _rebinds(earlier, names):
                return False
            if isinstance(earlier, ast.If) and not earlier.orelse and \
                    ast.dump(earlier.test) == ast.dump(flag) and _leaves(earlier.body[-1]):
                return True
        stmt = parent(stmt)
    return False


def _rebinds(stmt: ast.stmt, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in names
               for n in ast.walk(stmt))


def _leaves(stmt: ast.stmt) -> bool:
    """``raise ...``, ``return``, ``sys.exit(...)``/``exit()``/``quit()``."""
    if isinstance(stmt, (ast.Raise, ast.Return)):
        return True
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and (getattr(call.func, "id", None) in ("exit", "quit") or
                                           getattr(call.func, "attr", None) == "exit")


def _unscaled_twin(scaled: ast.AST, node: ast.AST) -> bool:
    """``node`` is ``loss.backward()`` and ``scaled`` is ``scaler.scale(loss).backward()``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)):
        return False
    name = node.func.value.id
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "scale" and any(isinstance(a, ast.Name) and a.id == name
                                                  for a in n.args)
               for n in ast.walk(scaled))


def _plain_backward(script: Script, node: ast.AST) -> bool:
    """``loss.backward()`` on a value that is no ``scaler.scale(...)``: a call of something
    else, or a local name assigned only from such calls. Anything else (a parameter, an
    unknown name) counts as scaled."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    recv = node.func.value
    if isinstance(recv, ast.Name):
        scope = script.enclosing_function(node) or script.tree
        values = local_assignments(script, scope).get(recv.id, ())
        return bool(values) and all(_unscaled_call(v) for v in values)
    return _unscaled_call(recv)


def _unscaled_call(value: ast.AST) -> bool:
    return isinstance(value, ast.Call) and not any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "scale"
        for n in ast.walk(value))
