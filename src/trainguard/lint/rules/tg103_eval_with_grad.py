"""TG103 eval-with-grad: evaluation forwards run with grad enabled and no backward follows.

Each forward records an autograd graph and keeps activations alive that nothing will use
(https://pytorch.org/docs/stable/generated/torch.no_grad.html). Silent when any enclosing
``with``, a decorator, or every same-file caller disables grad; for evaluation functions that
no code in the file calls (their callers, elsewhere, may disable grad); when the region reads gradients
(``torch.autograd.grad``, ``.grad``, ``requires_grad_``, ``x.requires_grad = True``: saliency,
adversarial evaluation; reading ``out.requires_grad`` is no such use) or the model's class's
``forward`` takes gradients itself (``torch.autograd.grad`` of an energy for forces); and
when the model called is frozen whole (``teacher.requires_grad_(False)``, or
``p.requires_grad = False`` for every ``p`` in ``teacher.parameters()``, also inside a loop over a
literal tuple of models, ``for net in (generator, assessor):``): its outputs then carry
no ``grad_fn``. A frozen part (``model.backbone``) leaves the rest recording graphs, so it does
not silence the forwards of ``model``. A function that backpropagates only under ``if train:``
(a parameter), called with ``train=False`` and grad enabled, is reported at that call. A bare
``torch.no_grad()`` statement (made and dropped, never entered) before forwards with no
backward is reported at that statement. A function under any name that switches its model to
eval mode and then runs it is inference when nothing it computes can reach a backward
(:mod:`trainguard.lint.escapes`). A function whose whole job is that evaluation is reported at
its ``def`` line, where ``@torch.no_grad()`` goes (:func:`_whole_evaluation`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, is_false, parent, walk_local
from trainguard.lint.frozen import frozen_models
from trainguard.lint.escapes import stays_out_of_backward
from trainguard.lint.regions import (_METRIC_HINT, EVAL_NAME, _inside_module_class,
                                     _sets_eval_first, eval_regions, forward_calls, rollout)
from trainguard.lint.rules import Hit
from trainguard.lint.script import NO_GRAD, Script, is_backward

CODE = "TG103"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    frozen = frozen_models(script)
    for region in eval_regions(script):
        if _uses_gradients(script, region.node):
            continue
        if isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                not script.call_sites(region.node):
            continue  # called from another file, whose caller may well hold no_grad
        for fwd in region.forwards:
            if script.grad_disabled(fwd) or _frozen_call(script, fwd, frozen) or \
                    _runs_without_grad(script, fwd) or _forward_takes_gradients(script, fwd):
                continue
            name = dotted(fwd.func) or "the model"
            if _whole_evaluation(script, region.node, region.forwards):
                yield _at_def(script, region.node, fwd, "never calls backward")
                break
            yield Hit(fwd, f"{region.label} runs {name}(...) with grad enabled and never calls "
                           f"backward: every batch records a graph that is kept alive for "
                           f"nothing")
            break
    yield from _after_eval(script, frozen)
    yield from _inference_functions(script, frozen)
    yield from _flagged_off(script, frozen)
    yield from _discarded_context(script, frozen)


def _whole_evaluation(script: Script, func: ast.AST, forwards: list[ast.Call]) -> bool:
    """Evaluation is ``func``'s whole job, so ``@torch.no_grad()`` on its ``def`` is the fix:
    its body is ``model.eval()``, the set-up of accumulators, one loop holding every forward
    (each a direct call of the model, not a step function shared with training), the scores
    computed from what it collected into local names (:func:`_local_result`) and its
    ``return``, and nothing in it names a grad context (a misplaced ``no_grad`` block is the
    line to change then). An evaluation that is one part of a longer function (it restores
    ``train()``, logs, stores) keeps the forward's line."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            any(script.callee(f) is not None for f in forwards) or \
            "no_grad" in (script.segment(func) or "") or "inference_mode" in (
                script.segment(func) or ""):
        return False
    body = func.body[1:] if isinstance(func.body[0], ast.Expr) and \
        isinstance(func.body[0].value, ast.Constant) else func.body
    loops = [st for st in body if isinstance(st, (ast.For, ast.AsyncFor, ast.While))]
    if len(loops) != 1 or not body or not isinstance(body[-1], ast.Return) or \
            not all(any(f is n for n in ast.walk(loops[0])) for f in forwards):
        return False
    head = body[:body.index(loops[0])]
    tail = body[body.index(loops[0]) + 1:-1]
    evals = [st for st in head if isinstance(st, ast.Expr) and _is_eval(st.value)]
    return bool(evals) and all(map(_local_result, tail)) and all(
        isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or st in evals
        for st in head)


def _local_result(stmt: ast.stmt) -> bool:
    """``tok_acc = (hits & mask).sum().item() / mask.sum().item()`` after the loop: a score
    computed into a local name from what the loop collected, with no mode switch (``train()``
    restored) and no store elsewhere (``self.history[...] = ...``): still the evaluation."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
    return bool(targets) and all(isinstance(n, (ast.Name, ast.Tuple)) for n in targets) and \
        not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                n.func.attr in ("train", "eval") for n in ast.walk(stmt))


def _at_def(script: Script, func: ast.FunctionDef | ast.AsyncFunctionDef, fwd: ast.Call,
            why: str) -> Hit:
    """The finding for an evaluation function (:func:`_whole_evaluation`), at its ``def``
    line, where ``@torch.no_grad()`` goes; the forward's line is in the message."""
    return Hit(func, f"{func.name}() switches to eval mode and runs "
                     f"{dotted(fwd.func) or 'the model'}(...) ({script.at(fwd.lineno)}) with "
                     f"grad enabled, and {why}: every call records a graph that is kept "
                     f"alive for nothing",
               fix=f"decorate {func.name}() with @torch.no_grad() (or @torch.inference_mode())")


def _is_eval(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "eval" and not node.args


def _discarded_context(script: Script, frozen: set[str]) -> Iterator[Hit]:
    """``torch.no_grad()`` (or ``inference_mode()``) written as a statement, not as ``with``:
    the context manager is made and dropped, grad stays enabled, and the forwards after it in
    the same function record graphs that no backward uses. ``set_grad_enabled(False)`` as a
    statement does switch grad off, so it is not one."""
    if "no_grad()" not in script.source and "inference_mode()" not in script.source:
        return
    for node in script.nodes:
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and
                script.call_qualname(node.value) in NO_GRAD and not node.value.args):
            continue
        scope = script.enclosing_function(node)
        if scope is None or script.has_backward(scope) or _uses_gradients(script, scope):
            continue
        fwds = [f for f in sorted(forward_calls(script, scope), key=lambda c: c.lineno)
                if f.lineno > node.lineno and
                not script.grad_disabled(f) and not _frozen_call(script, f, frozen)]
        if fwds:
            q = script.call_qualname(node.value)
            yield Hit(node, f"{q}() is called as a statement: the context manager is created "
                            f"and dropped, so grad stays enabled and "
                            f"{dotted(fwds[0].func) or 'the model'}(...) "
                            f"({script.at(fwds[0].lineno)}) records a graph no backward uses",
                      fix="indent the code under `with torch.no_grad():` (or decorate the "
                          "function with @torch.no_grad())")


def _flagged_off(script: Script, frozen: set[str]) -> Iterator[Hit]:
    """A function that runs the model and backpropagates only under ``if <param>:`` (a shared
    ``iteration(epoch, loader, train=True)``), called with that parameter ``False`` and grad
    enabled: that call runs the forwards, records their graphs and never calls backward
    (codertimo/BERT-pytorch-style trainers). Reported at the call, where ``torch.no_grad()``
    goes."""
    from trainguard.lint.callgraph import bind_arguments, defaults

    if not script.may_reach("backward"):
        return
    for func in script.nodes:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        backwards = [c for c in walk_local(func) if is_backward(c)]
        if not backwards:
            continue
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        guards = [n for n in walk_local(func) if isinstance(n, ast.If) and
                  isinstance(n.test, ast.Name) and n.test.id in params]
        flags = {g.test.id for g in guards}  # type: ignore[attr-defined]
        guarded = {id(c) for g in guards for st in g.body for c in ast.walk(st)}
        if len(flags) != 1 or any(id(b) not in guarded for b in backwards):
            continue  # (every backward of the function sits in the body of one ``if <param>:``)
        fwds = [f for f in forward_calls(script, func)
                if not script.grad_disabled(f) and not _frozen_call(script, f, frozen)]
        if not fwds:
            continue
        names = params[1:] if params[:1] == ["self"] else params
        for site in script.call_sites(func)[:8]:
            bound = {**defaults(func), **bind_arguments(names, site)}
            off = [f for f in flags if f in bound and is_false(bound[f])]
            if not off or script.grad_disabled(site):
                continue
            yield Hit(site, f"{func.name}() runs {dotted(fwds[0].func) or 'the model'}(...) "
                            f"({script.at(fwds[0].lineno)}) with grad enabled, and this call "
                            f"passes {off[0]}=False, which skips its backward: every batch "
                            f"records a graph that is kept alive for nothing",
                      fix="wrap this call in `with torch.no_grad():` (or decorate the "
                          "evaluation with @torch.no_grad())")


def _runs_without_grad(script: Script, call: ast.Call) -> bool:
    """``self.model.predict(x)`` whose method is decorated ``@torch.no_grad()``
    (``inference_mode``): the method disables grad itself."""
    found = [t for t in script.targets(call) if not t.instance]
    return bool(found) and all(
        any(script.grad_context(d) is True for d in getattr(t.func, "decorator_list", ()))
        for t in found)


def _after_eval(script: Script, frozen: set[str]) -> Iterator[Hit]:
    """Evaluation written as plain statements: ``model.eval()`` and, after it in the same block
    (a notebook cell, a function body), forwards of that model feeding a metric, with grad
    enabled, no backward and no ``model.train()`` before them (also through a function of the
    file handed the model: ``acc = split_accuracy(model, x, y)``). Loops and evaluation
    functions are judged as regions; a block that goes on to call backward, or returns outputs
    that may reach one in a caller (a frozen-BatchNorm training step, a teacher), stays
    silent."""
    if ".eval()" not in script.source:
        return
    judged = {id(n) for r in eval_regions(script) for n in ast.walk(r.node)}
    for node in script.nodes:
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and
                isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "eval"
                and not node.value.args and id(node) not in judged):
            continue
        key = script.key(node.value.func.value)
        if not key or not script.is_model(key) or key in frozen:
            continue
        window = _window(script, node, key)
        if window is None:
            continue
        forwards = [f for st in window for f in forward_calls(script, st)
                    if _runs_model(script, f, key) and not script.grad_disabled(f)
                    and not _in_loop_or_def(f, st) and not isinstance(parent(f), ast.Expr)
                    and not _forward_takes_gradients(script, f)]
        text = "\n".join(script.segment(st) or "" for st in window)
        if not forwards or not _METRIC_HINT.search(text) or \
                _reaches_backward_or_caller(script, window) or _uses_gradients_in(script, window):
            continue
        fwd = forwards[0]
        name = f"{key}(...)" if script.key(fwd.func) == key else \
            f"{dotted(fwd.func)}({key}, ...)"
        yield Hit(fwd, f"{name} runs after {key}.eval() at {script.at(node.lineno)} with "
                       f"grad enabled, and no backward follows: the outputs carry a graph "
                       f"that is kept alive for nothing")


def _inference_functions(script: Script, frozen: set[str]) -> Iterator[Hit]:
    """A function under any name (a gallery's ``_embed``, a generator of logits) that switches
    its model to eval mode and then runs it with grad enabled, where the file shows that
    nothing it computes ever reaches a backward (:mod:`trainguard.lint.escapes`: every value
    ends in a metric, an index, ``.item()`` or is dropped, at every call site): it is
    inference, and each forward records a graph for nothing. A value returned to a caller that
    trains on it, stored where the file cannot follow, or handed to code of another file keeps
    it silent."""
    if ".eval()" not in script.source:
        return
    judged = {id(r.node) for r in eval_regions(script)}
    for func in script.nodes:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                id(func) in judged or EVAL_NAME.match(func.name) or \
                _inside_module_class(script, func) or not script.call_sites(func):
            continue
        fwds = forward_calls(script, func)
        if not fwds or not _sets_eval_first(func, fwds) or script.has_backward(func) or \
                rollout(script, func) or _uses_gradients(script, func):
            continue
        live = [f for f in fwds if not script.grad_disabled(f) and
                not _frozen_call(script, f, frozen) and not _runs_without_grad(script, f) and
                not _forward_takes_gradients(script, f)]
        if not live or not all(stays_out_of_backward(script, f) for f in fwds):
            continue
        fwd = min(live, key=lambda f: (f.lineno, f.col_offset))
        if _whole_evaluation(script, func, fwds):
            yield _at_def(script, func, fwd, "nothing it computes reaches a backward")
            continue
        yield Hit(fwd, f"{func.name}() switches to eval mode and runs "
                       f"{dotted(fwd.func) or 'the model'}(...) with grad enabled, and nothing "
                       f"it computes reaches a backward: every call records a graph that is "
                       f"kept alive for nothing")


def _runs_model(script: Script, fwd: ast.Call, key: str) -> bool:
    """``fwd`` runs the model ``key``: a call of it, or of a function of this file that is
    handed it and runs it in its caller's grad and module mode (``hit_rate(model, batch)``,
    :func:`~trainguard.lint.regions.forward_calls` tells those apart)."""
    if script.key(fwd.func) == key:
        return True
    return isinstance(fwd.func, ast.Name) and any(script.key(a) == key for a in fwd.args)


def _window(script: Script, start: ast.stmt, key: str) -> list[ast.stmt] | None:
    """The statements after ``start`` in its block up to ``key.train()``."""
    owner = parent(start)
    body = next((b for b in (getattr(owner, f, None) for f in ("body", "orelse", "finalbody"))
                 if isinstance(b, list) and start in b), None)
    if body is None:
        return None
    out = []
    for st in body[body.index(start) + 1:]:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a definition runs nothing here
        if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
               c.func.attr == "train" and script.key(c.func.value) == key
               for c in walk_local(st)):
            break
        out.append(st)
    return out


def _reaches_backward_or_caller(script: Script, stmts: list[ast.stmt]) -> bool:
    """The block calls backward, or returns a value that may reach a backward in a caller."""
    if any(script.has_backward(st) for st in stmts):
        return True
    if not any(isinstance(r, ast.Return) and r.value is not None
               for st in stmts for r in [st, *walk_local(st)]):
        return False
    func = script.enclosing_function(stmts[0]) if stmts else None
    return func is None or _result_may_reach_backward(script, func)


def _result_may_reach_backward(script: Script, func: ast.AST) -> bool:
    """What ``func`` returns may reach a backward: it has no caller in this file (one
    elsewhere may backpropagate), or a caller keeps the result other than in plain names, or a
    backward of the caller's scope reads those names or what is computed from them
    (assignments, ``x.append(name)``, in any order: a loop's next iteration reads them too).
    Names that leave the scope (returned, stored on an object) count as reaching one."""
    sites = script.call_sites(func)  # type: ignore[arg-type]
    if not sites:
        return True
    for site in sites:
        stmt = parent(site)
        if not (isinstance(stmt, ast.Assign) and stmt.value is site and all(
                isinstance(n, (ast.Name, ast.Tuple, ast.Store)) for t in stmt.targets
                for n in ast.walk(t))):
            return True  # handed on directly (an argument, a return, a stored attribute)
        scope = script.enclosing_function(site) or script.tree
        names = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if _names_reach_backward(scope, names):
            return True
    return False


_LOGS = frozenset({"print", "len", "repr", "str", "float", "int", "isinstance", "type"})


def _names_reach_backward(scope: ast.AST, names: set[str]) -> bool:
    """A backward in ``scope`` reads ``names`` (closed over what is computed from them), or
    one of them leaves the scope (returned, stored on an object, a global)."""
    local = list(walk_local(scope))

    def reads(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))

    grown = True
    while grown:
        grown = False
        for n in local:
            new: set[str] = set()
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and \
                    n.value is not None and reads(n.value):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(not isinstance(m, (ast.Name, ast.Tuple, ast.Store, ast.Load))
                       for t in targets for m in ast.walk(t)):
                    return True  # stored on an object or in a container
                new = {m.id for t in targets for m in ast.walk(t) if isinstance(m, ast.Name)}
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    isinstance(n.func.value, ast.Name) and any(map(reads, n.args)):
                new = {n.func.value.id}  # bank.append(feats): the container holds it
            elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and \
                    isinstance(n.value.func, ast.Name) and n.value.func.id not in _LOGS and \
                    any(map(reads, [*n.value.args, *(k.value for k in n.value.keywords)])):
                return True  # update_bank(feats): a function of unknown effect keeps it
            if new - names:
                names |= new
                grown = True
    return any((isinstance(n, ast.Return) and n.value is not None and reads(n.value)) or
               isinstance(n, (ast.Global, ast.Nonlocal)) and set(n.names) & names or
               isinstance(n, ast.Call) and reads(n) and (
                   is_backward(n) or (dotted(n.func) or "").endswith(("autograd.grad",
                                                                      "autograd.backward")))
               for n in local)


def _in_loop_or_def(node: ast.AST, top: ast.stmt) -> bool:
    n = node
    while n is not None and n is not top:
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                          ast.AsyncFunctionDef, ast.Lambda)):
            return True
        n = parent(n)
    return isinstance(top, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                            ast.AsyncFunctionDef))


def _uses_gradients_in(script: Script, stmts: list[ast.stmt]) -> bool:
    return any(_uses_gradients(script, st) for st in stmts)


def _forward_takes_gradients(script: Script, fwd: ast.Call) -> bool:
    """The model called is of a class whose ``forward`` takes gradients itself (forces as
    ``-torch.autograd.grad(energy, pos)``, a PINN's derivatives): it cannot run under
    ``no_grad``, in evaluation either."""
    graph = script.graph
    for ref in graph.types(fwd.func):
        target = graph.method(ref, "forward")
        if target is not None and any(
                isinstance(n, ast.Call) and (
                    (target.script.call_qualname(n) or "").endswith("autograd.grad")
                    or isinstance(n.func, ast.Attribute) and n.func.attr == "backward")
                for n in ast.walk(target.func)):
            return True
    return False


def _uses_gradients(script: Script, node: ast.AST) -> bool:
    for n in script.reachable(node):
        for sub in walk_local(n):
            if isinstance(sub, ast.Attribute) and (
                    sub.attr in ("grad", "requires_grad_") or
                    sub.attr == "requires_grad" and isinstance(sub.ctx, ast.Store)):
                return True  # reading ``out.requires_grad`` only inspects the flag
            if isinstance(sub, ast.Call) and (script.call_qualname(sub) or "").endswith(
                    ("autograd.grad", "enable_grad", "set_grad_enabled")):
                return True
    return False


def _frozen_call(script: Script, fwd: ast.Call, frozen: set[str]) -> bool:
    """The forward runs a frozen model; a parameter (``evaluate(net)``) may be one when the
    file freezes any model, so it counts as frozen then."""
    if not frozen:
        return False
    f = fwd.func.value if isinstance(fwd.func, ast.Attribute) and \
        fwd.func.attr == "forward" else fwd.func
    k = script.key(f)
    if k in frozen:
        return True
    func = script.enclosing_function(fwd)
    head = (k or "").split(".")[0]
    return func is not None and head in {a.arg for a in func.args.args} and \
        head not in script.assignments
