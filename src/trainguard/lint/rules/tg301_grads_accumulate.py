"""TG301 grads-accumulate: optimizer steps with no gradient zeroing in between.

``backward()`` adds into ``.grad`` (https://pytorch.org/docs/stable/optim.html#taking-an-optimization-step);
without ``zero_grad()`` in the loop every step uses the sum of all earlier gradients. Any zeroing
counts (``optimizer.zero_grad()``, ``model.zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``),
wherever it sits in the iteration and in same-file functions the loop calls, including an LBFGS
closure. Declared accumulation (zeroing after each conditional step) has zeroing and is silent.
A zeroing counts only where it can run (``if DEBUG: optimizer.zero_grad()`` with ``DEBUG =
False`` is none) and only for the modules it clears: ``netC.zero_grad()`` does not clear
``netS``, which ``optimizerG`` steps, and ``encoder.zero_grad()`` does not clear the decoder the
same optimizer holds (:mod:`trainguard.lint.optimizers`); a step no zeroing serves is reported
at the top of its own step, its first forward of a module the optimizer holds. A zeroing on a
name the file cannot relate to the optimizer's modules counts as clearing them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import exclusive, if_branches, parent, walk_local
from trainguard.lint.dataflow import reaching_values
from trainguard.lint.events import Event, events
from trainguard.lint.optimizers import cleared, held_modules, zero_covers
from trainguard.lint.regions import forward_calls, loop_label, training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG301"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
# Distributed autograd (torch.distributed.autograd.backward(context_id, ...)) accumulates into a
# fresh context per iteration, so its loops need no zeroing.


def check(script: Script) -> Iterator[Hit]:
    steps: set[int] = set()  # steps reported: an epoch loop around a reported loop adds nothing
    # the loops that hold their step themselves first: the one to report a step in
    loops = sorted(training_loops(script), key=lambda lp: any(
        e.kind == "step" and e.via is not None for e in events(script, lp.body)))
    for loop in loops:
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        if _zeroes_in_closure(script, loop):
            continue
        zeros = [e for e in evs if e.kind == "zero"]
        leftover = _leftover_before(script, loop, evs) if zeros else None
        if leftover is not None:
            yield leftover
        if zeros:
            hit = _branch_without_zeroing(script, evs, zeros) or \
                _partial_zeroing(script, loop, evs, zeros)
            if hit is not None:
                yield hit
            continue
        if any((script.call_qualname(e.node) or "").startswith("torch.distributed.autograd")
               for e in evs if e.kind == "backward"):
            continue  # distributed autograd keeps gradients per context: nothing to zero
        step = next(e for e in evs if e.kind == "step")
        uncalled = _uncalled_zero_grad(loop)
        if uncalled is not None:
            yield Hit(uncalled, f"`{ast.unparse(uncalled)}` names the method but never calls it: "
                                f"gradients are never zeroed and add up over every step",
                      fix=f"call it: {ast.unparse(uncalled)}()")
            continue
        hoisted = _zeroed_before(script, loop, step.key)
        if hoisted is not None:  # optimizer.zero_grad() once, above the loop: the line to move
            yield Hit(hoisted,
                      f"this zeroing runs once, before {loop_label(script, loop)}, but "
                      f"{step.key or 'the optimizer'}.step() at {script.at(step.site.lineno)} "
                      f"runs in every iteration: each step uses the sum of all earlier "
                      f"gradients",
                      fix="move it into the loop (before backward, or after step)")
            continue
        # where zero_grad() goes: before the iteration's one backward when it sits beside the
        # step (a backward in an inner loop accumulates on purpose: then at the step)
        bwds = [e for e in evs if e.kind == "backward"]
        at = bwds[0].site if len(bwds) == 1 and not bwds[0].via and \
            _same_loop(script, bwds[0].node, step.node) else step.site
        if bwds and at is bwds[0].site:
            at = _step_start(script, loop, at)
        if id(step.node) in steps:
            continue
        steps.add(id(step.node))
        yield Hit(at,
                  f"{step.key or 'the optimizer'}.step() at {script.at(step.site.lineno)} runs in "
                  f"every iteration of {loop_label(script, loop)}, but gradients are never "
                  f"zeroed there: each step uses the sum of all earlier gradients",
                  fix=f"call {step.key or 'optimizer'}.zero_grad(set_to_none=True) once per step "
                      f"(before backward or after step)")


def _leftover_before(script: Script, loop: ast.AST, evs: list[Event]) -> Hit | None:
    """A loop that zeroes only after its step (``backward(); step(); zero_grad()``), preceded
    by a backward that nothing zeroes before the loop starts (a sanity check of the gradient
    flow, ``check_grads_flow(model)``): the first step uses those gradients plus the first
    batch's. Reported at that backward (at the call that reaches it), where the zeroing goes."""
    kinds = [e.kind for e in evs]
    first_step = kinds.index("step")
    if kinds.index("zero") < first_step or "backward" not in kinds[:first_step]:
        return None
    back = _unzeroed_backward(script, loop)
    if back is None:
        return None
    step = evs[first_step]
    held = held_modules(script, step.key, at=step.node)
    used = _backward_models(script, back)
    if held and used and not _related(used, held):
        return None  # (a teacher's saliency backward before a student's loop)
    at = back.via or back.node
    via = f" (through the call at {script.at(at.lineno)})" if back.via is not None else ""
    return Hit(at,
               f"the backward() at {back.place(script)}{via} runs before "
               f"{loop_label(script, loop)}, which zeroes gradients only after "
               f"{step.key or 'the optimizer'}.step() at {step.place(script)}: nothing clears "
               f"them in between, so the first step uses them plus the first batch's",
               fix=f"call {step.key or 'optimizer'}.zero_grad(set_to_none=True) after it, "
                   f"before the loop")


def _backward_models(script: Script, back: Event) -> set[str]:
    """The model keys the loss of ``back`` is computed with (``teacher`` in
    ``teacher(x).sum().backward()``, in ``s = teacher(x).sum(); s.backward()`` and in
    ``probe(teacher)`` reaching it), following local names three assignments back; empty when
    none is found (then unknown)."""
    if back.via is not None:
        exprs: list[ast.AST] = list(back.via.args)
    else:
        func = getattr(back.node, "func", None)
        exprs = [func.value] if isinstance(func, ast.Attribute) else []
    found: set[str] = set()
    for _ in range(3):
        later: list[ast.AST] = []
        for expr in exprs:
            for n in ast.walk(expr):
                k = script.key(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
                if script.is_model(k):
                    found.add(k)  # type: ignore[arg-type]
                elif isinstance(n, ast.Name) and back.via is None:
                    later += reaching_values(n.id, back.node)
        exprs = later
    return found


def _related(keys: set[str], held: frozenset[str]) -> bool:
    """Some key of ``keys`` is one of ``held`` or a submodule or parent of one."""
    return any(k == h or k.startswith(h + ".") or h.startswith(k + ".") for k in keys
               for h in held)


def _unzeroed_backward(script: Script, loop: ast.AST) -> Event | None:
    """The last backward that the statements above ``loop`` in its block (and in the blocks of
    the ``if``/``with``/``try`` around it) run outside any loop, when no zeroing follows it;
    None when a zeroing or another loop comes first, going up."""
    node: ast.AST = loop
    while True:
        p = parent(node)
        body = next((getattr(p, f) for f in ("body", "orelse", "finalbody")
                     if node in getattr(p, f, ())), None)
        if body is None:
            return None
        for stmt in reversed(body[:body.index(node)]):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a definition runs nothing
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                return None
            for e in reversed(events(script, [stmt])):
                if e.kind in ("zero", "setgrad", "step"):
                    return None
                if e.kind == "backward":
                    return None if e.foreign or script.enclosing_loops(e.node) else e
        if not isinstance(p, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            return None
        node = p


def _step_start(script: Script, loop: ast.AST, backward: ast.AST) -> ast.AST:
    """The first forward with grad of the iteration, in the loop body before ``backward`` (the
    top of the step, where the tutorials put ``zero_grad``, as ``trainguard run`` reports it),
    else ``backward``."""
    line = backward.lineno  # type: ignore[attr-defined]
    found = [c for c in forward_calls(script, loop) if c.lineno <= line and
             not script.grad_disabled(c) and script.enclosing_loops(c)[:1] ==
             script.enclosing_loops(backward)[:1]]
    return min(found, key=lambda c: (c.lineno, c.col_offset)) if found else backward


def _stale_start(script: Script, loop: ast.AST, evs: list[Event], bwd: Event,
                 held: frozenset[str]) -> ast.AST:
    """The top of the step whose zeroing is missing: the first forward with grad of a module
    in ``held`` (what the optimizer steps) since the step before ``bwd`` in the code that holds
    ``bwd`` (the loop body, or the file's helper the loop calls), as ``trainguard run`` reports
    it (``D(fake)`` above ``loss_D.backward()``); else ``bwd``'s own line. A forward of another
    model (the encoder whose output is detached for the discriminator) does not start it."""
    node = bwd.node
    region = loop if bwd.via is None else script.enclosing_function(node)
    if bwd.foreign or region is None:
        return bwd.site
    top, line = region.lineno, node.lineno  # type: ignore[attr-defined]
    lower = max((n.lineno for e in evs if e.kind == "step" for n in (e.node, e.via)
                 if n is not None and top <= n.lineno < line), default=0)
    found = [c for c in forward_calls(script, region)
             if lower < c.lineno <= line and not script.grad_disabled(c) and
             script.enclosing_loops(c)[:1] == script.enclosing_loops(node)[:1] and
             _called_module(script, c) in held]
    return min(found, key=lambda c: (c.lineno, c.col_offset)) if found else bwd.site


def _called_module(script: Script, call: ast.Call) -> str | None:
    """The key of the module a forward call runs (``self.critic`` for ``self.critic(x)`` and
    ``self.critic.forward(x)``)."""
    f = call.func
    return script.key(f.value if isinstance(f, ast.Attribute) and f.attr == "forward" else f)


def _zeroed_before(script: Script, loop: ast.AST, step_key: str | None) -> ast.AST | None:
    """A ``zero_grad()`` call that clears what optimizer ``step_key`` steps, written above
    ``loop`` in its block, or above a loop around it (the epoch loop), with no other training
    loop in between: zeroing hoisted out of the batch loop. A loop in between that runs no
    backward, step nor zeroing (``for p in D.parameters(): p.requires_grad_(True)``, a loop
    setting each param group's learning rate) leaves the gradients as they are, and is passed."""
    node: ast.AST = loop
    while True:
        p = parent(node)
        body = next((getattr(p, f) for f in ("body", "orelse") if node in getattr(p, f, ())),
                    None)
        if body is None:
            return None
        for stmt in reversed(body[:body.index(node)]):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return None
            evs = events(script, [stmt])
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                if any(e.kind in ("backward", "step", "zero") for e in evs):
                    return None
                continue
            for e in evs:
                if e.kind == "zero" and not e.via and zero_covers(script, [e.key], step_key):
                    return e.node
        if not isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
            return None
        node = p


def _same_loop(script: Script, a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` run once per iteration of the same innermost loop (the step may sit in an
    ``if`` of that iteration: ``if torch.isfinite(grad_norm): optimizer.step()``); a backward in
    an inner loop of its own accumulates on purpose."""
    la, lb = script.enclosing_loops(a), script.enclosing_loops(b)
    if not la and not lb:  # a step function: one iteration per call
        return script.enclosing_function(a) is script.enclosing_function(b)
    return bool(la) and bool(lb) and la[0] is lb[0]


def _same_block(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` are statements of the same block (or expressions in them)."""
    def block(n: ast.AST) -> tuple[int, str] | None:
        while (p := parent(n)) is not None:
            for field in ("body", "orelse", "finalbody"):
                if n in getattr(p, field, ()):
                    return id(p), field
            n = p
        return None
    return block(a) == block(b)


def _partial_zeroing(script: Script, loop: ast.AST, evs: list, zeros: list) -> Hit | None:
    """A loop that zeroes gradients, but not those of every module a stepped optimizer holds
    (``netC.zero_grad()`` while ``optimizerG`` steps ``netS``; ``encoder.zero_grad()`` while the
    optimizer also holds the decoder)."""
    keys = [z.key for z in zeros]
    for step in (e for e in evs if e.kind == "step"):
        if zero_covers(script, keys, step.key):
            continue
        held = held_modules(script, step.key) or frozenset()
        done: set[str] = set()
        for z in zeros:
            done |= cleared(script, z.key, step.key) or set()
        missing = ", ".join(sorted(held - done))
        # the zeroing that runs last before this step (in the iteration, or in the one before)
        # is the one meant for it: report there
        partial = [z for z in zeros if cleared(script, z.key, step.key) is not None]
        at = evs.index(step)
        before = [z for z in partial if evs.index(z) < at]
        wrong = before[-1] if before else partial[-1]
        names = ", ".join(sorted({f"{z.key}.zero_grad()" for z in zeros}))
        if _next_step(evs, evs.index(wrong)) is not step:
            # that zeroing belongs to another step (``opt_E.zero_grad()`` before
            # ``opt_E.step()``): none is meant for this one, so the first backward since the
            # previous step adds onto stale gradients, and the zeroing goes before it
            bwd = _first_backward_before(evs, at)
            if bwd is not None:
                top = _stale_start(script, loop, evs, bwd, held)
                here = "this backward" if top is bwd.site else \
                    f"this forward starts the step, and the backward at {bwd.place(script)}"
                return Hit(top,
                           f"{here} adds onto the gradients of {missing}, which nothing "
                           f"zeroes since the last {step.key}.step(): {loop_label(script, loop)} "
                           f"zeroes gradients only through {names}, so {step.key}.step() "
                           f"({step.place(script)}) updates them with the sum of all earlier "
                           f"gradients",
                           fix=f"call {step.key}.zero_grad(set_to_none=True) before "
                               f"{'this backward' if top is bwd.site else 'this forward'}")
        return Hit(wrong.site,
                   f"{loop_label(script, loop)} zeroes gradients only through {names}, "
                   f"which leaves those of {missing} uncleared: {step.key}.step() "
                   f"({step.place(script)}) updates them with the sum of all earlier gradients",
                   fix=f"call {step.key}.zero_grad(set_to_none=True) once per step: it clears "
                       f"every parameter the optimizer holds")
    return None


def _branch_without_zeroing(script: Script, evs: list, zeros: list) -> Hit | None:
    """A step in one branch of an ``if`` whose gradients only the other branch zeroes (``if
    use_bf16: backward(); step()`` / ``else: zero_grad(); backward(); step()``): on that branch's
    path every step adds onto the last one's gradients. Reported at the branch's first backward
    since the previous step, where the zeroing belongs."""
    for step in (e for e in evs if e.kind == "step"):
        if any(not _apart(z, step) for z in zeros) or \
                not zero_covers(script, [z.key for z in zeros], step.key):
            continue
        path = [e for e in evs if not _apart(e, step)]
        bwd = _first_backward_before(path, path.index(step))
        fork = _fork(step, zeros[0])
        where = f"the `if {ast.unparse(fork.test)}:` at {script.at(fork.lineno)}" \
            if fork is not None else "an `if`"
        return Hit(bwd.site if bwd is not None else step.site,
                   f"on this branch of {where}, gradients are never zeroed: only the other "
                   f"branch zeroes them ({zeros[0].place(script)}), so each "
                   f"{step.key or 'optimizer'}.step() here ({step.place(script)}) updates the "
                   f"parameters with the sum of all earlier gradients",
                   fix=f"call {step.key or 'optimizer'}.zero_grad(set_to_none=True) before this "
                       f"backward, or once before the `if` for both branches")
    return None


def _apart(a, b) -> bool:  # type: ignore[no-untyped-def]
    """Events that never run in the same iteration: in opposite branches of one ``if`` (their
    own calls, or the calls that brought them in from a function)."""
    return exclusive(a.node, b.node) or exclusive(a.via or a.node, b.via or b.node)


def _fork(a, b) -> ast.If | None:  # type: ignore[no-untyped-def]
    """The ``if`` whose opposite branches hold events ``a`` and ``b``."""
    for x, y in ((a.node, b.node), (a.via or a.node, b.via or b.node)):
        arms_y = if_branches(y)
        n = x
        while (p := parent(n)) is not None:
            if isinstance(p, ast.If) and id(p) in arms_y and \
                    arms_y[id(p)] != ("body" if n in p.body else "orelse"):
                return p
            n = p
    return None


def _next_step(evs: list, i: int):  # type: ignore[no-untyped-def]
    """The first step event after ``evs[i]``, wrapping round to the next iteration."""
    for j in range(1, len(evs) + 1):
        e = evs[(i + j) % len(evs)]
        if e.kind == "step":
            return e
    return None


def _first_backward_before(evs: list, at: int):  # type: ignore[no-untyped-def]
    """The first backward between the step before ``evs[at]`` (wrapping round to the previous
    iteration) and ``evs[at]``: where gradients start to pile onto stale ones."""
    found = None
    for j in range(1, len(evs)):
        e = evs[(at - j) % len(evs)]
        if e.kind == "step":
            break
        if e.kind == "backward":
            found = e
    return found


def _zeroes_in_closure(script: Script, loop: ast.AST) -> bool:
    """Functions defined in the loop or passed to ``step(closure)`` that zero gradients."""
    funcs = [n for n in walk_local(loop, into_defs=True)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for call in walk_local(loop):
        if isinstance(call, ast.Call):
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(arg, ast.Name):
                    funcs.extend(script.functions.get(arg.id, ()))
    zeroing = _zeroing_functions(script)
    return any(id(f) in zeroing for f in funcs)


def _zeroing_functions(script: Script) -> set[int]:
    """ids of the functions and lambdas whose code (nested code included) names ``zero_grad``
    or ``.grad``, read once per file."""
    found = script.__dict__.get("_tg_zeroing_functions")
    if found is None:
        found = set()
        for node in script.nodes:
            if isinstance(node, ast.Attribute) and node.attr in ("zero_grad", "grad"):
                n = node
                while (n := parent(n)) is not None:
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                        found.add(id(n))
        script.__dict__["_tg_zeroing_functions"] = found
    return found


def _uncalled_zero_grad(loop: ast.AST) -> ast.AST | None:
    """``optimizer.zero_grad`` as a statement, without the call parentheses."""
    for sub in walk_local(loop):
        if isinstance(sub, ast.Expr) and isinstance(sub.value, ast.Attribute) and \
                sub.value.attr == "zero_grad":
            return sub.value
    return None
