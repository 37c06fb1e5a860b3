"""TG302 zero-grad-before-step: gradients zeroed between ``backward()`` and ``step()``.

The step then sees zero (or ``None``) gradients and nothing learns. Only a zeroing that concerns
the stepped optimizer counts: the same optimizer, ``p.grad = None``, or ``model.zero_grad()`` when
the loop steps a single optimizer (several optimizers: a GAN zeroes one while stepping another).
A zeroing on a path that leaves the iteration (``continue``, ``return``, ``raise``) is silent,
and so is one under a test for non-finite values (skipping one bad update). Callbacks the loop
fires are followed, also by name (``getattr(cb, "on_" + event)(self)``); Lightning's
``on_after_backward``/``on_before_optimizer_step`` hooks run between backward and step.
A hook's ``ctx["optimizer"]`` is the optimizer the trainer stored there, and an optimizer the
hook was built with is the stepped one when the file builds only one (:func:`_sole_optimizer`).
A zeroing that runs every iteration after a step that runs only under a test undoes gradient
accumulation (each step sees one micro-batch); so does one at the top of the iteration when
every iteration runs backward and the step runs only every few (``if (i + 1) % accum == 0``).
A step in a branch that ends the iteration (``if step == 0: ...; opt.step(); continue``) never
precedes a zeroing later in the same iteration. A backward after an optimizer's last step of the
iteration, into that optimizer's models, is wiped by its zeroing on the next pass
(:mod:`trainguard.lint.late_backward`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import COMPREHENSIONS, dotted, encloses, exclusive, ifs_between, parent
from trainguard.lint.events import Event, events
from trainguard.lint.late_backward import late_backwards
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG302"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    yield from _framework_hooks(script)
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        steppers = {e.key for e in evs if e.kind == "step"}
        for i, e in enumerate(evs):
            if e.kind != "zero" or _leaves_iteration(e.node, loop) or _guarded(e.node):
                continue
            before = [x.kind for x in evs[:i] if x.kind in ("backward", "step")]
            if not before or before[-1] != "backward":
                continue
            step = _next_step(evs[i + 1:])
            if step is None or not _related(script, e, step, steppers):
                continue
            if not e.foreign and not step.foreign and exclusive(e.node, step.node):
                continue  # `if frozen: zero_grad() else: step()` never runs both
            back = next(x for x in reversed(evs[:i]) if x.kind == "backward")
            call = _misplaced_call(script, e, back, step)
            what = f"gradients are zeroed at {e.place(script)}" if call is None else \
                f"{ast.unparse(call.func)}() zeroes the gradients (at {e.place(script)})"
            yield Hit(e.node if call is None else call,
                      f"{what} after backward() and before {step.key or 'the optimizer'}.step() "
                      f"at {step.place(script)}: the step sees no gradients",
                      fix="move zero_grad() before backward() or after step()" if call is None
                      else f"call {ast.unparse(call.func)}() after step(), not before it")
        yield from _micro_loop_zeroing(script, loop, evs, steppers)
        for back, key, step, wipe in late_backwards(script, loop, evs):
            yield Hit(back.node,
                      f"this backward() runs after {key}.step() at {step.place(script)} and no "
                      f"step of {key} follows it in the iteration: {key}.zero_grad() at "
                      f"{wipe.place(script)} wipes its gradients on the next pass before any "
                      f"step uses them, so this loss never changes the model",
                      fix=f"call {key}.step() after the last backward() of the iteration")
        yield from _unconditional_after_conditional_step(script, loop, evs)


def _misplaced_call(script: Script, zero: Event, back: Event, step: Event
                    ) -> ast.Call | None:
    """The call of a helper of the file that zeroes the gradients as its own last chore
    (``log_grads(epoch)``, whose ``__call__`` reads the norms and then runs
    ``model.zero_grad()``), made between a backward and a step of the function that calls it:
    the helper is right after the step, so the call is what is misplaced. None when the zeroing
    is reached through a dispatch to callbacks (a hook named for its moment is at fault itself),
    or when the backward or the step runs in the helper too."""
    func = script.enclosing_function(zero.node)
    home = script.enclosing_function(step.node)
    if zero.via is None or zero.foreign or back.foreign or step.foreign or func is None or \
            func is home or script.enclosing_function(back.node) is not home:
        return None
    for call in [zero.via, *script.call_sites(func)]:
        if script.enclosing_function(call) is not home or \
                not back.node.lineno < call.lineno < step.node.lineno or \
                isinstance(call.func, ast.Attribute) and _loop_target(call.func.value):
            continue
        callees = [t.func for t in [*script.targets(call),
                                    *script.graph.instance_targets(call)]]
        if func in callees:
            return call
    return None


def _loop_target(recv: ast.expr) -> bool:
    """``cb`` in ``for cb in self.callbacks: cb.after_backward(self)``."""
    if not isinstance(recv, ast.Name):
        return False
    loop = parent(recv)
    while loop is not None and not isinstance(loop, _SCOPES):
        if isinstance(loop, _LOOPS + COMPREHENSIONS) and any(
                isinstance(n, ast.Name) and n.id == recv.id
                for t in _loop_targets(loop) for n in ast.walk(t)):
            return True
        loop = parent(loop)
    return False


def _micro_loop_zeroing(script: Script, loop: ast.AST, evs: list[Event],
                        steppers: set[str | None]) -> Iterator[Hit]:
    """A zeroing at the top of a micro-batch loop whose passes each run backward, with the step
    after the loop: every pass wipes what the earlier passes' backward accumulated, so the step
    uses the last micro-batch only (tatsu-lab/alpaca_farm#57). Silent when the zeroed object
    changes with the loop (``for model in models: model.zero_grad()``), when the loop reads
    each pass's ``.grad`` (gradients kept per task and combined: PCGrad) or steps itself."""
    for i, e in enumerate(evs):
        if e.kind != "zero" or e.foreign or _guarded(e.node):
            continue
        found = _passes(script, e.node)
        if found is None:
            continue
        inner, one_pass = found
        if inner is loop or isinstance(inner, _LOOPS) and _leaves_iteration(e.node, inner):
            continue
        targets = {n.id for t in _loop_targets(inner) for n in ast.walk(t)
                   if isinstance(n, ast.Name)}
        if targets & {n.id for n in ast.walk(e.node) if isinstance(n, ast.Name)} or any(
                isinstance(n, ast.Attribute) and n.attr == "grad" and
                isinstance(n.ctx, ast.Load) for n in ast.walk(inner)):
            continue  # per-pass gradients read (kept per task, PCGrad): zeroed on purpose
        at = next((j for j, x in enumerate(one_pass) if x.node is e.node), None)
        if at is None or not any(x.kind == "backward" for x in one_pass[at + 1:]) or \
                any(x.kind == "step" for x in one_pass):
            continue
        after = [x for x in evs[i + 1:] if not encloses(inner, x.via or x.node)
                 and not encloses(inner, x.node)]
        step = _next_step([x for x in after if x.kind != "backward"])
        if step is None or not _related(script, e, step, steppers) or \
                not step.foreign and exclusive(inner, step.via or step.node):
            continue  # `if minibatch: for ...: zero; backward` `else: ...; step()`
        yield Hit(e.node,
                  f"gradients are zeroed in every pass of the loop at "
                  f"{script.at(inner.lineno)}, whose passes each run backward() before "
                  f"{step.key or 'the optimizer'}.step() at {step.place(script)}: each pass "
                  f"wipes the gradients of the passes before it, so the step uses the last "
                  f"micro-batch only",
                  fix="zero once before the loop (or after the step), not inside it")
        return



_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _passes(script: Script, zero: ast.AST) -> tuple[ast.AST, list[Event]] | None:
    """The loop whose every pass runs ``zero``, and the events of one pass: the loop around it in
    its function; else, for a function with no loop of its own (``forward_backward()``), a loop
    or comprehension around a call of it (``sum(fb(mb) for mb in chunks)``), with that
    function's events as one pass."""
    inner = next(iter(script.enclosing_loops(zero)), None)
    if inner is not None:
        return inner, events(script, inner.body)  # type: ignore[attr-defined]
    func = script.enclosing_function(zero)
    for site in script.call_sites(func)[:4] if func is not None else ():
        n = parent(site)
        while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda, ast.Module)):
            if isinstance(n, _LOOPS + COMPREHENSIONS):
                return n, events(script, func.body)  # type: ignore[union-attr]
            n = parent(n)
    return None


def _loop_targets(loop: ast.AST) -> list[ast.AST]:
    if isinstance(loop, COMPREHENSIONS):
        return [g.target for g in loop.generators]
    return [getattr(loop, "target", ast.Pass())]


# Hooks a training framework runs after backward() and before optimizer.step()
# (Lightning: https://lightning.ai/docs/pytorch/stable/common/lightning_module.html#hooks).
_BETWEEN_HOOKS = ("on_after_backward", "on_before_optimizer_step")
_FRAMEWORK_BASES = ("LightningModule", "Callback")


def _framework_hooks(script: Script) -> Iterator[Hit]:
    """A Lightning module's or callback's ``on_after_backward``/``on_before_optimizer_step``
    that zeroes the whole module's (or the hook's optimizer's) gradients: the framework steps
    right after the hook returns. Zeroing a part (``self.embedding.zero_grad()``, a frozen
    layer) is how a layer is kept fixed and stays silent."""
    if "lightning" not in script.source:
        return
    for cls in script.classes.values():
        if not any((dotted(b) or "").endswith(_FRAMEWORK_BASES) for b in cls.bases):
            continue
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name not in _BETWEEN_HOOKS:
                continue
            is_module = any((dotted(b) or "").endswith("LightningModule") for b in cls.bases)
            whole = {a.arg for a in fn.args.args[1:]} - {"trainer"} | \
                {"trainer.model", "trainer.lightning_module"} | ({"self"} if is_module else set())
            for e in events(script, fn.body):
                if e.kind == "zero" and e.key in whole and not _guarded(e.node):
                    yield Hit(e.site, f"{e.key}.zero_grad() in {fn.name}(), which runs after "
                                      f"backward() and before the optimizer step: the step "
                                      f"sees no gradients",
                              fix="zero only the part to keep fixed (a sub-module's "
                                  "zero_grad()), or freeze it with requires_grad_(False)")


def _unconditional_after_conditional_step(script: Script, loop: ast.AST, evs: list[Event]
                                          ) -> Iterator[Hit]:
    """Gradient accumulation undone: the step runs only under a test (``if (it + 1) % accum
    == 0:``), but a zeroing after it runs in every iteration, so the gradients of every
    iteration that does not step are discarded and each step sees one micro-batch
    (gaozhihan/PreDiff#32). Reported at that zeroing."""
    for i, e in enumerate(evs):
        if e.kind != "zero" or e.via is not None or ifs_between(e.node, loop):
            continue
        since, back = _since_backward(evs, i, loop)
        if back is None:
            continue  # no backward in the iteration
        steps = [x for x in reversed(since) if x.kind == "step"]  # in program order
        if not steps or not all(ifs_between(x.node, loop) and x.via is None for x in steps):
            continue
        if _outside_step_loop(e.node, steps, loop):
            continue  # zeroed once per pass of an outer loop (an epoch), not per micro-batch
        if evs.index(back) > i and not (_accumulates(back, steps, loop) and any(
                _related(script, e, x, {x.key for x in evs if x.kind == "step"})
                for x in steps)):
            continue
        if _both_branches(steps, loop, [x for x in evs if x.kind == "step" and x.via is None]):
            continue  # `if scaler: scaler.step(opt) else: opt.step()`: every path steps
        cond = next((p for p in ifs_between(steps[0].node, loop)), None)
        test = ast.unparse(cond.test) if cond is not None else "a test"
        if cond is not None and not any(encloses(b, steps[0].node) for b in cond.body):
            test = f"not ({test})"  # the step is in the `else` of that test
        yield Hit(e.node,
                  f"this zeroing runs in every iteration, but {steps[0].key or 'the optimizer'}"
                  f".step() at {steps[0].place(script)} runs only when {test}: the gradients "
                  f"of every iteration that does not step are discarded, so each step sees "
                  f"one batch's gradients instead of the accumulated ones",
                  fix="zero the gradients only after the step (inside the same if)")
        return


def _outside_step_loop(zero: ast.AST, steps: list[Event], loop: ast.AST) -> bool:
    """The zeroing is not in the body of the innermost loop around a step: ``opt.zero_grad()``
    at the top of an epoch, before ``for k, batch in ...: ...; if (k + 1) % accum == 0:
    opt.step(); opt.zero_grad()``, runs once before the accumulation starts, not in every
    micro-batch of the loop that steps."""
    for x in steps:
        inner = next(iter(Script.enclosing_loops(x.node)), loop)
        if inner is not loop and encloses(loop, inner) and not encloses(inner, zero):
            return True
    return False


def _since_backward(evs: list[Event], i: int, loop: ast.AST
                    ) -> tuple[list[Event], Event | None]:
    """The last ``backward`` before ``evs[i]`` and the events between them, latest first, going
    round to the end of the previous iteration when the zeroing comes before this iteration's
    backward (``zero_grad(); backward(); if ...: step()``). Earlier in the same iteration, events
    in a branch that ends the iteration (``if step == 0: ...; opt.step(); continue``) never reach
    the zeroing and are passed over."""
    seen: list[Event] = []
    for j, x in enumerate([*reversed(evs[:i]), *reversed(evs[i + 1:])]):
        if j < i and _left_before(x.via or x.node, evs[i].node, loop):
            continue
        if x.kind == "backward":
            return seen, x
        seen.append(x)
    return seen, None


_ACCUM = ("accum", "update_freq", "grad_steps", "iters_to_accumulate")


def _accumulates(back: Event, steps: list[Event], loop: ast.AST) -> bool:
    """The zeroing at the top of the iteration undoes accumulation: the backward before it
    (the previous iteration's) runs in every iteration, and the step runs only every few
    (``if (i + 1) % accum_steps == 0:``). A step under any other test (finite gradients, a
    warm-up flag) is a skipped update: the next iteration's zeroing is right then."""
    if ifs_between(back.via or back.node, loop):
        return False  # the backward may run only with the step
    return all(any(_periodic(cond.test) for cond in ifs_between(x.node, loop)) for x in steps)


def _periodic(test: ast.expr) -> bool:
    """``(i + 1) % accum == 0``, ``micro_step == grad_accum_steps - 1``."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)) \
        or any(w in (dotted(n) or "").lower() for n in ast.walk(test)
               if isinstance(n, (ast.Name, ast.Attribute)) for w in _ACCUM)


def _left_before(node: ast.AST, later: ast.AST, loop: ast.AST) -> bool:
    """A block around ``node`` (in its innermost loop, which is ``loop``) ends the iteration
    (``continue``, ``break``, ``return``, ``raise``) and does not hold ``later``: a path through
    ``node`` never reaches ``later`` in the same iteration."""
    n = node
    while (p := parent(n)) is not None and p is not loop:
        if isinstance(p, _LOOPS + COMPREHENSIONS) or isinstance(p, _SCOPES):
            return False  # a `continue` here would end an inner loop's pass, not the iteration
        for block in (getattr(p, f, None) for f in ("body", "orelse", "finalbody")):
            if isinstance(block, list) and n in block and not any(
                    encloses(b, later) or b is later for b in block) and any(
                    isinstance(b, _LEAVES) for b in block[block.index(n) + 1:]):
                return True
        n = p
    return False


_LEAVES = (ast.Continue, ast.Break, ast.Return, ast.Raise)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _both_branches(steps: list[Event], loop: ast.AST, every: list[Event]) -> bool:
    """Some unconditional ``if`` of the loop body steps the optimizer of ``steps`` on every path
    through it: in its body and in its ``else`` (:func:`_always_steps`). The other branch's
    step is looked for among ``every`` step of the iteration: it comes before this branch's
    backward in the flattened events (``if fp16: scaler.scale(loss).backward();
    scaler.step(opt) else: loss.backward(); opt.step()``, a ``GradScaler``'s ``step(opt)``
    stepping ``opt``), so a zeroing after the ``if`` follows a step on every path."""
    for e in steps:
        ifs = ifs_between(e.node, loop)
        top = ifs[-1] if ifs else None
        if top is None or not top.orelse:
            continue
        same = [x for x in every if x.key == e.key or None in (x.key, e.key)]
        if _always_steps(top.body, same) and _always_steps(top.orelse, same):
            return True
    return False


def _always_steps(block: list[ast.stmt], steps: list[Event]) -> bool:
    """Every pass through ``block`` runs one of ``steps``: a statement of the block runs it
    under no further test or loop, or an ``if``/``elif`` chain of the block steps in each of
    its branches. A step under ``if (i + 1) % accum == 0:`` does not step every pass."""
    for stmt in block:
        if isinstance(stmt, ast.If):
            if stmt.orelse and _always_steps(stmt.body, steps) and \
                    _always_steps(stmt.orelse, steps):
                return True
            continue
        if isinstance(stmt, _LOOPS + (ast.Try, ast.Match)):
            continue
        if any(_plainly_in(x.node, stmt) for x in steps):
            return True
    return False


def _plainly_in(node: ast.AST, stmt: ast.stmt) -> bool:
    """``node`` is inside ``stmt`` with no test or loop between them (a ``with`` may be)."""
    n = parent(node)
    while n is not None and n is not stmt:
        if isinstance(n, (ast.If, ast.Try, ast.Match) + _LOOPS + _SCOPES):
            return False
        n = parent(n)
    return n is stmt


def _next_step(evs: list[Event]) -> Event | None:
    for e in evs:
        if e.kind in ("backward", "setgrad"):
            return None  # new gradients (a backward, or set by hand) before the step
        if e.kind == "step":
            return e
    return None


def _related(script: Script, zero: Event, step: Event, steppers: set[str | None]) -> bool:
    if zero.key in ("*", step.key):
        return True
    return len(steppers) == 1 and (script.is_model(zero.key) or
                                   _sole_optimizer(script, zero.key, step.key))


def _sole_optimizer(script: Script, zero: str | None, step: str | None) -> bool:
    """``self.optimizer.zero_grad()`` in a hook built with the optimizer (``ResetGrads(opt)``)
    while the loop steps its own ``optimizer``: two names, and both name an optimizer, but
    the file builds one optimizer only, so they are that one. A second optimizer built by any
    call (``opt_d = make(disc)``) leaves the names apart."""
    if not (script.is_optimizer(zero) and script.is_optimizer(step)):
        return False
    built = [k for k, vs in script.assignments.items() if script.is_optimizer(k) and
             any(isinstance(v, ast.Call) for v in vs)]
    return len(built) == 1


_NONFINITE = ("isfinite", "isnan", "isinf")


def _guarded(node: ast.AST) -> bool:
    """Under an ``if`` that tests for non-finite values (``if not torch.isfinite(norm):``):
    the gradients are dropped on purpose, to skip one bad update."""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, (ast.FunctionDef, ast.Module)):
        if isinstance(p, ast.If) and any(
                isinstance(x, (ast.Name, ast.Attribute)) and
                (x.id if isinstance(x, ast.Name) else x.attr) in _NONFINITE
                for x in ast.walk(p.test)):
            return True
        n = p
    return False


def _leaves_iteration(node: ast.AST, loop: ast.AST) -> bool:
    n = node
    while (p := parent(n)) is not None and p is not loop:
        if isinstance(p, (ast.If, ast.ExceptHandler)):
            block = p.body if n in getattr(p, "body", []) else getattr(p, "orelse", [])
            if any(isinstance(s, (ast.Continue, ast.Return, ast.Raise, ast.Break))
                   for s in block):
                return True
        n = p
    return False
