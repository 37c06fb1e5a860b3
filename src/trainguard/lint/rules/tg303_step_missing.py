"""TG303 step-missing: backward runs but no optimizer ever steps.

Gradients are computed and thrown away; the parameters never change. Fires only when the file
builds an optimizer, a loop runs backward in a function that names an optimizer, and nothing in
the file steps it: no ``.step()`` on an
optimizer or a ``GradScaler``, no manual update from ``.grad`` (manual SGD), and no call in the
loop that is handed the optimizer (a helper elsewhere may step it; not a function of the file
that never reads it, such as a hook stepping only the scheduler: reported in that function).

When the step exists but sits under a test on the batch index of ``enumerate(loader)`` that no
index of an epoch satisfies (``(step + 1) % 32 == 0`` over 29 batches), reported at the test.
When other optimizers step: one that the file zeroes but never steps nor hands to anything (a
GAN's ``opt_d.step()`` left out), reported at the backward that follows its zeroing.
When every step sits in one branch of an ``if`` on a setting the loop never changes
(``if args.minibatch: ... else: ...; optimizer.step()``) and the other branch runs backward with
no step after it, reported at that backward: with that setting, nothing ever steps.
When a function steps a global optimizer instead of the one it is handed and never reads, and a
call hands it another (:mod:`trainguard.lint.shadowed_optimizers`), reported at that step.
When the step exists but the model it should update was rebound to a new module after the
optimizer was built (:mod:`trainguard.lint.rebinds`), reported at the rebinding.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import SCOPES, dotted, encloses, parent, walk_local
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.consts import truth
from trainguard.lint.events import events
from trainguard.lint.rebinds import stale_optimizers
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward
from trainguard.lint.shadowed_optimizers import shadowed_steps

CODE = "TG303"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    yield from _shadowed(script)
    if not script.optimizers:
        return
    for rebinding, opt, model, step, shared in stale_optimizers(script):
        how = f"the copy shares {opt} with the original, whose parameters it holds" \
            if shared else f"{opt} was built from the old module's parameters"
        at = script.at(step.lineno)  # type: ignore[attr-defined]
        yield Hit(rebinding, f"{model} is replaced here by a new module, but {how}: the "
                             f"optimizer step at {at} never updates the new one, so the model "
                             f"that is trained never changes",
                  fix=f"build {opt} after this line from the new module's parameters (or "
                      f"deep-copy the whole object)" if shared else
                      f"build {opt} after this line, from the new module's parameters")
    if _steps_somewhere(script):
        if ("enumerate" in script.source or "%" in script.source) and \
                not _manual_update(script):
            yield from _branch_never_taken(script)
        if "zero_grad" in script.source and not _manual_update(script):
            yield from _one_never_stepped(script)
        if not _manual_update(script):
            yield from _setting_branch_without_step(script)
        return
    if _manual_update(script):
        return
    for call in script.calls:
        if not is_backward(call) or not script.enclosing_loops(call):
            continue
        loop = script.enclosing_loops(call)[-1]
        if _hands_optimizer(script, loop) or not _scope_has_optimizer(script, loop):
            continue
        unread = _unread_handoff(script, loop)
        if unread is not None:  # a hook handed the optimizer is where its step belongs
            yield _unread_hit(script, *unread)
            return
        names = ", ".join(sorted(script.optimizers))
        at = script.at(loop.lineno)  # type: ignore[attr-defined]
        yield Hit(call, f"backward() runs in the loop at {at} but "
                        f"{names}.step() is never called: the parameters never change",
                  fix=f"call {sorted(script.optimizers)[0]}.step() after backward()")
        return
    yield from _backward_in_called_step(script)


def _shadowed(script: Script) -> Iterator[Hit]:
    """A function handed an optimizer that it never reads, stepping a global one instead
    (:mod:`trainguard.lint.shadowed_optimizers`): the optimizer handed in never steps."""
    for found in shadowed_steps(script):
        through = f" (passed on at {script.at(found.via.lineno)})" \
            if found.via is not None else ""
        yield Hit(found.step,
                  f"{found.func.name}() steps the global `{found.stepped}`, not its parameter "
                  f"`{found.param}`, which it never reads: the call at "
                  f"{script.at(found.site.lineno)} hands it `{found.handed}`{through}, which "
                  f"nothing steps, so the parameters {found.handed} holds get gradients and "
                  f"never change",
                  fix=f"step (and zero) the optimizer passed in: {found.param}.step()")


def _backward_in_called_step(script: Script) -> Iterator[Hit]:
    """A backward outside any loop of its own function, in a step function or method that a
    loop calls (``for step in range(n): self.train_step()``), while nothing steps: reported at
    the backward as the loop reaches it, once."""
    for loop in script.nodes:
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or \
                _hands_optimizer(script, loop):
            continue
        for e in events(script, loop.body):
            func = script.enclosing_function(e.node)
            if e.kind != "backward" or e.via is None or e.foreign or func is None or \
                    _hands_optimizer(script, func) or \
                    not (_scope_has_optimizer(script, loop) or _names_optimizer(script, func)):
                continue  # (a helper handed the optimizer may step it)
            unread = _unread_handoff(script, func) or _unread_handoff(script, loop)
            if unread is not None:
                yield _unread_hit(script, *unread)
                return
            names = ", ".join(sorted(script.optimizers))
            yield Hit(e.node, f"backward() runs once per iteration of the loop at "
                              f"{script.at(loop.lineno)} (through the call at "
                              f"{script.at(e.via.lineno)}), but {names}.step() is never "
                              f"called: the parameters never change",
                      fix=f"call {sorted(script.optimizers)[0]}.step() after backward() (and "
                          f"gradient clipping)")
            return


def _steps_somewhere(script: Script) -> bool:
    for call in script.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "step":
            k = script.key(f.value)
            if not script.is_scheduler(k):
                return True
    return False


def _manual_update(script: Script) -> bool:
    """Some statement reads ``.grad`` to update or compute with it (manual SGD:
    ``p.data.add_(p.grad, alpha=-lr)``); ``p.grad = None`` is zeroing, not updating."""
    if ".grad" not in script.source:
        return False
    for node in script.nodes:
        if not (isinstance(node, ast.Attribute) and node.attr == "grad"):
            continue
        up = parent(node)
        if isinstance(up, ast.Call) and up.func is node:
            continue  # torch.autograd.grad(...): a function, not a tensor's gradient
        n = node
        while (n := parent(n)) is not None:
            if isinstance(n, (ast.AugAssign, ast.Call)):
                return True
            if isinstance(n, ast.Assign):
                if all(isinstance(t, ast.Attribute) and t.attr == "grad" for t in n.targets):
                    continue
                return True
    return False


def _hands_optimizer(script: Script, loop: ast.AST) -> bool:
    """A call in ``loop`` is handed an optimizer, and may step it: not one whose function never
    reads the parameter that receives it (:func:`_unread_receiver`)."""
    return any(_unread_receiver(script, call, arg) is None
               for call, arg in _optimizer_arguments(script, loop))


def _unread_handoff(script: Script, loop: ast.AST
                    ) -> tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef, str] | None:
    """The first call in ``loop`` handing an optimizer to a function that never reads it, with
    that function and its parameter (a trainer's ``module.optimizer_step(step, optimizer,
    scheduler)`` running an override that only steps the scheduler)."""
    for call, arg in _optimizer_arguments(script, loop):
        found = _unread_receiver(script, call, arg)
        if found is not None:
            return (call, *found)
    return None


def _unread_hit(script: Script, site: ast.Call, func: ast.FunctionDef | ast.AsyncFunctionDef,
                param: str) -> Hit:
    return Hit(_first_statement(func), f"{func.name}() is handed the optimizer as `{param}` at "
                                       f"{script.at(site.lineno)} and never reads it: nothing "
                                       f"steps the optimizer, so the parameters never change",
               fix=f"call {param}.step() in {func.name}()")


def _optimizer_arguments(script: Script, loop: ast.AST) -> Iterator[tuple[ast.Call, ast.expr]]:
    for call in walk_local(loop):
        if isinstance(call, ast.Call) and not (isinstance(call.func, ast.Attribute)
                                               and call.func.attr == "zero_grad"):
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                if script.is_optimizer(script.key(arg)):
                    yield call, arg


def _unread_receiver(script: Script, call: ast.Call, arg: ast.expr
                     ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str] | None:
    """The one function of this file ``call`` runs and its parameter bound to ``arg``, when
    nothing in it (nested functions included) reads that parameter: it cannot step what it is
    handed. None when the call runs something else or several things, the function takes
    ``*args``/``**kwargs``, or its body is a stub (``pass``, ``...``, ``raise``) that
    subclasses override."""
    targets = script.targets(call)
    if len(targets) != 1 or targets[0].instance or targets[0].script is not script:
        return None
    func = targets[0].func
    if func.args.vararg or func.args.kwarg or _stub(func):
        return None
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    if targets[0].bound and params and \
            not any(dotted(d) == "staticmethod" for d in func.decorator_list):
        params = params[1:]
    param = next((p for p, a in bind_arguments(params, call).items() if a is arg), None)
    if param is None or any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(func)):
        return None
    return func, param


def _stub(func: ast.AST) -> bool:
    body = [s for s in func.body if not (isinstance(s, ast.Expr)  # type: ignore[attr-defined]
                                         and isinstance(s.value, ast.Constant))]
    return all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)


def _first_statement(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
    """The first statement of ``func``'s body after its docstring."""
    body = func.body
    doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    return body[1] if doc and len(body) > 1 else body[0]


def _scope_has_optimizer(script: Script, loop: ast.AST) -> bool:
    """The function (or module) around the loop names an optimizer: a profiling loop that runs
    backward in a file that also builds optimizers elsewhere is not a training loop."""
    scope = script.enclosing_function(loop) or script.tree
    return any(isinstance(n, (ast.Name, ast.Attribute)) and script.is_optimizer(script.key(n))
               for n in walk_local(scope))


def _names_optimizer(script: Script, func: ast.AST) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and script.is_optimizer(script.key(n))
               for n in walk_local(func))


def _one_never_stepped(script: Script) -> Iterator[Hit]:
    """An optimizer the file zeroes and never steps, while others step: the parameters it
    holds get gradients from the backward that follows its zeroing and never change (a GAN
    whose discriminator's ``opt_d.step()`` is missing). Silent when the optimizer is handed to
    anything (a call, a list, a return value, another name): a helper or a framework may step
    it."""
    zeroed: dict[str, ast.Call] = {}
    for call in script.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "zero_grad":
            k = script.key(f.value)
            if script.is_optimizer(k):
                zeroed.setdefault(k, call)  # type: ignore[arg-type]
    for key, zero in sorted(zeroed.items()):
        if _stepped_or_handed(script, key):
            continue
        scope = script.enclosing_function(zero) or script.tree
        after = [c for c in walk_local(scope) if isinstance(c, ast.Call) and is_backward(c) and
                 (c.lineno, c.col_offset) > (zero.lineno, zero.col_offset)]
        if not after:
            continue
        backward = min(after, key=lambda c: (c.lineno, c.col_offset))
        yield Hit(backward, f"{key}.zero_grad() at {script.at(zero.lineno)} and this backward() "
                            f"give {key}'s parameters gradients, but {key}.step() is never "
                            f"called: they never change",
                  fix=f"call {key}.step() after this backward()")


def _stepped_or_handed(script: Script, key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    for node in script.nodes:
        if not (isinstance(node, ast.Name) and node.id == last or
                isinstance(node, ast.Attribute) and node.attr == last) or \
                script.key(node) != key:
            continue
        p = parent(node)
        if isinstance(p, ast.Attribute):
            if p.attr == "step":
                return True
            continue  # key.zero_grad, key.param_groups, ...
        if isinstance(p, ast.Assign) and node in p.targets or \
                isinstance(p, (ast.Tuple, ast.List)) and isinstance(p.ctx, ast.Store):
            continue  # where it is built or unpacked
        ret = p if isinstance(p, ast.Return) else parent(p) if isinstance(p, ast.Tuple) else None
        if isinstance(ret, ast.Return):
            func = script.enclosing_function(ret)
            if func is not None and script.call_sites(func):
                continue  # a builder of the file: its callers' names are followed instead
        return True  # an argument, a container element, a value returned to a framework
        # (configure_optimizers), another name
    return False


def _branch_never_taken(script: Script) -> Iterator[Hit]:
    """Every optimizer step of the file sits under an ``if`` that never passes, while a
    backward runs: an accumulation test on the batch index of ``for i, batch in
    enumerate(loader)`` that no index of one epoch satisfies (``(i + 1) % 32 == 0`` over a
    loader of 29 batches; the index restarts every epoch, the loader's length comes from the
    file: :func:`trainguard.lint.shapes.samples`, ``batch_size``, ``drop_last``), or a test
    that is false whenever a remainder by one in it is 0 (:func:`_modulo_one_gate`)."""
    if not any(is_backward(c) for c in script.calls):
        return
    steps = [c for c in script.calls if isinstance(c.func, ast.Attribute) and
             c.func.attr == "step" and not script.is_scheduler(script.key(c.func.value))]
    tests: dict[int, tuple[ast.If, str]] = {}
    for call in steps:
        gate = _index_gate(script, call) if "enumerate" in script.source else None
        if gate is not None:
            tests[id(gate)] = gate, f"this test is false for every batch index of an epoch " \
                                    f"({ast.unparse(gate.test)}), so the optimizer step under it"
            continue
        gate, divisor = _modulo_one_gate(script, call)
        if gate is None:
            return
        tests[id(gate)] = gate, f"this test ({ast.unparse(gate.test)}) keeps the loop from " \
                                f"reaching the optimizer step at {script.at(call.lineno)} " \
                                f"whenever {divisor} is 1 (its value as written), as any whole " \
                                f"number modulo 1 is 0, so the step"
    for gate, what in tests.values():
        yield Hit(gate.test, f"{what} never runs: backward() accumulates gradients and the "
                             f"parameters never change",
                  fix="count optimizer steps across epochs (a global step), or step when the "
                      "epoch ends" if "batch index" in what else
                      "step when the remainder is 0 (`if (step + 1) % accumulation == 0:`)")


def _modulo_one_gate(script: Script, call: ast.Call) -> tuple[ast.If | None, str]:
    """The ``if`` in the loop around ``call`` that keeps the loop from ever reaching it once
    each remainder ``n % k`` in its test whose divisor ``k`` is 1 (a constant of the file, an
    option's default) is replaced by 0, and that divisor; else ``(None, "")``. Any whole number
    modulo 1 is 0, so ``if batches_done % accumulation: optimizer.step()`` never steps with an
    accumulation of 1, nor does ``if i % accumulation == 0: continue`` placed before the step.
    Remainders of strings (``"%d" % n`` formats) and of known floats are left alone."""
    if not script.enclosing_loops(call):
        return None, ""
    n: ast.AST = call
    while (p := parent(n)) is not None and not isinstance(p, (*SCOPES, ast.Module)):
        for field in ("body", "orelse"):
            block = getattr(p, field, None)
            if not isinstance(block, list) or n not in block:
                continue
            if isinstance(p, ast.If):  # the test decides whether the block runs
                value, divisor = _zeroed_truth(script, p.test)
                if divisor and value is (field == "orelse"):
                    return p, divisor
            for before in block[:block.index(n)]:  # if ...: continue, before the step
                if isinstance(before, ast.If) and not before.orelse and \
                        isinstance(before.body[-1], (ast.Continue, ast.Break, ast.Return,
                                                     ast.Raise)):
                    value, divisor = _zeroed_truth(script, before.test)
                    if divisor and value is True:
                        return before, divisor
        if isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
            break
        n = p
    return None, ""


def _zeroed_truth(script: Script, test: ast.expr) -> tuple[bool | None, str]:
    """The truth of ``test`` with each remainder by 1 in it replaced by 0 (None when unknown),
    and the first such divisor's source ("" when there is none)."""
    from trainguard.lint.consts import _link, resolve, truth

    ones = {ast.unparse(m): m for m in ast.walk(test)
            if isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod) and
            _is_one(resolve(script, m.right)) and not isinstance(m.left, ast.JoinedStr) and
            not isinstance(resolve(script, m.left), (str, float))}
    if not ones:
        return None, ""
    copy = _ZeroRemainders(set(ones)).visit(ast.parse(ast.unparse(test), mode="eval").body)
    _link(copy, parent(test))
    return truth(copy), ast.unparse(next(iter(ones.values())).right)


def _is_one(value: object) -> bool:
    return type(value) is int and value == 1


class _ZeroRemainders(ast.NodeTransformer):
    """Replaces each remainder whose source is one of ``texts`` by the constant 0."""

    def __init__(self, texts: set[str]) -> None:
        self.texts = texts

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        if ast.unparse(node) in self.texts:
            return ast.copy_location(ast.Constant(0), node)
        return self.generic_visit(node)


def _index_gate(script: Script, call: ast.Call) -> ast.If | None:
    """The ``if`` around ``call`` whose test is false for every index of the enclosing
    ``enumerate(loader)`` loop, or None."""
    from trainguard.lint.consts import _COMPARE, UNKNOWN, const_eval
    from trainguard.lint.shapes import batches

    n = call
    while (p := parent(n)) is not None and not isinstance(p, (ast.FunctionDef, ast.Module)):
        if isinstance(p, ast.If) and n in p.body:
            loop = next((a for a in script.enclosing_loops(p)
                         if isinstance(a, ast.For) and isinstance(a.iter, ast.Call) and
                         isinstance(a.iter.func, ast.Name) and a.iter.func.id == "enumerate" and
                         isinstance(a.target, ast.Tuple) and a.target.elts and
                         isinstance(a.target.elts[0], ast.Name)), None)
            if loop is None:
                return None
            index = loop.target.elts[0].id  # type: ignore[union-attr]
            if index not in {x.id for x in ast.walk(p.test) if isinstance(x, ast.Name)}:
                n = p
                continue
            args = loop.iter.args  # type: ignore[union-attr]
            count = batches(script, args[0]) if args else UNKNOWN
            start = const_eval(args[1]) if len(args) > 1 else 0
            if not isinstance(count, int) or not isinstance(start, int) or count > 100_000:
                return None
            test = p.test
            if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
                    type(test.ops[0]) in _COMPARE):
                return None
            for i in range(start, start + count):
                env = {index: ast.Constant(i)}
                left = const_eval(test.left, env=env)
                right = const_eval(test.comparators[0], env=env)
                if left is UNKNOWN or right is UNKNOWN or \
                        _COMPARE[type(test.ops[0])](left, right):
                    return None
            return p
        n = p
    return None


def _setting_branch_without_step(script: Script) -> Iterator[Hit]:
    """A backward in one branch of an ``if`` inside a training loop whose other branch steps,
    when every step of the loop sits in that other branch and the test reads only a setting
    the loop never assigns (``args.minibatch``, ``cfg.use_amp``: no call, no loop variable):
    each iteration takes the same branch, so with that setting the optimizer never steps
    (pytorch/pytorch-lightning#5995, an apex branch that skipped ``optimizer.step``). A test on
    the iteration (``if (i + 1) % accum:``) is accumulation, and a branch handed the optimizer
    may step it in a helper: both stay silent."""
    for call in script.calls:
        loops = script.enclosing_loops(call)
        if not is_backward(call) or not loops:
            continue
        found = _setting_if(script, call, loops[-1])
        if found is None:
            continue
        gate, branch, other = found
        evs = events(script, loops[-1].body)  # type: ignore[attr-defined]
        steps = [e for e in evs if e.kind == "step"]
        inside = lambda e: any(s is (e.via or e.node) or encloses(s, e.via or e.node)  # noqa
                               for s in other)
        if not steps or not all(inside(e) for e in steps) or \
                any(e.kind == "step" for e in events(script, branch)) or \
                any(_hands_optimizer(script, s) for s in branch):
            continue
        key = steps[0].key or "the optimizer"
        which = "is false" if branch is gate.orelse else "holds"
        yield Hit(call, f"backward() runs here, but {key}.step() runs only in the other branch "
                        f"of the test at {script.at(gate.lineno)} ({ast.unparse(gate.test)}), "
                        f"a setting the loop never changes: when it {which}, no iteration "
                        f"steps and the parameters never change",
                  fix=f"call {key}.step() after this backward() too, or step after the if")
        return


def _setting_if(script: Script, call: ast.AST, outer: ast.AST
                ) -> tuple[ast.If, list[ast.stmt], list[ast.stmt]] | None:
    """The innermost ``if`` between ``call`` and the loop ``outer`` whose test reads only
    names the loop never assigns, with ``call``'s branch and the other one; else None."""
    n = call
    while (p := parent(n)) is not None and p is not outer:
        if isinstance(p, ast.If) and p.orelse and n is not p.test:
            mine, other = (p.body, p.orelse) if n in p.body else (p.orelse, p.body)
            taken = truth(p.test)
            if taken is not None and taken is (mine is p.orelse):
                return None  # the file fixes the setting: this branch never runs
            return (p, mine, other) if _invariant(p.test, outer) else None
        n = p
    return None


def _invariant(test: ast.expr, loop: ast.AST) -> bool:
    """``test`` reads settings only (names, attributes, constants, comparisons; no call, no
    ``self``) whose names nothing in ``loop`` assigns."""
    allowed = (ast.Name, ast.Attribute, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp,
               ast.Load, ast.cmpop, ast.boolop, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(test)):
        return False
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if not names or "self" in names:
        return False
    stored = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and
              isinstance(n.ctx, (ast.Store, ast.Del))}
    changed = {ast.unparse(n) for n in ast.walk(loop) if isinstance(n, ast.Attribute) and
               isinstance(n.ctx, (ast.Store, ast.Del))}  # `cfg.warmup = False` in the loop
    read = {ast.unparse(n) for n in ast.walk(test) if isinstance(n, ast.Attribute)}
    return not names & stored and not read & changed
