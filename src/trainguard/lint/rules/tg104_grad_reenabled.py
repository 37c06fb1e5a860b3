"""TG104 grad-reenabled: ``torch.enable_grad()`` / ``set_grad_enabled(True)`` inside evaluation.

Inside ``with torch.no_grad()`` (or an evaluation function), re-enabling grad makes the outputs
carry a ``grad_fn`` again (https://pytorch.org/docs/stable/generated/torch.enable_grad.html).
Silent when the re-enabled block reads gradients on purpose (``backward``,
``torch.autograd.grad``, ``.grad``: adversarial examples, saliency maps, test-time training),
unless it also runs a forward that no gradient read uses and whose output leaves the block
(``pred = model(x)`` next to the Jacobian that needs grad): reported at that forward (or a
value computed from it) when every pass through the block takes a gradient, since the
re-enabling is then needed; at the re-enabling when a pass can leave the block without one.
An update built there from a tensor the block made require grad that leaves it undetached
(``x_adv = x + delta + eps * grad.sign()``) is reported at its line (:func:`_escaping_update`).
``requires_grad_(True)`` alone under no_grad builds no graph and is not flagged.

The re-enabling may be a ``with`` block, a ``set_grad_enabled(True)`` statement (one that
"restores" grad mode unconditionally at the end of a helper) or a ``@torch.enable_grad()``
decorator; it is inside evaluation when any call of its function is made under no_grad (a
helper called from both training and evaluation re-enables grad for the evaluation). Reported
at the re-enabling, with the call that runs it under no_grad; a helper of another project file
that re-enables grad is reported at the call made here under no_grad. ``mode=True`` by name
counts. Silent under ``torch.inference_mode()``, where re-enabling grad records no graph.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from typing import Any

from trainguard.lint.astutil import (assigned_pairs, dotted, is_false, is_true, kwarg, parent,
                                     self_attr, walk_local)
from trainguard.lint.callgraph import bind_arguments, defaults
from trainguard.lint.consts import const_eval
from trainguard.lint.project import imports_mention
from trainguard.lint.module_methods import runs_layers
from trainguard.lint.regions import eval_regions, forward_calls
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG104"
_ENABLES = re.compile(r"enable_grad|set_grad_enabled|"
                      r"(inference_mode|no_grad)\(\s*(mode\s*=\s*)?False")
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    yield from _foreign_helpers(script)
    if not _ENABLES.search(script.source):
        return  # nothing re-enables grad (an alias keeps the name in its import)
    regions = [r.node for r in eval_regions(script)
               if isinstance(r.node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node, target, idle in _reenablings(script, script.nodes):
        caller = _disabled_caller(script, node)
        if caller is not None and _in_inference_mode(script, node if caller is True else caller):
            continue  # inference mode records no graph, whatever the grad mode
        inside = caller is not None
        region = next((r for r in regions if _within(node, r)), None)
        if not inside and region is None:
            continue
        if isinstance(caller, ast.Call):
            where = f"a torch.no_grad() region (the call at {script.at(caller.lineno)})"
        elif inside:
            where = "a torch.no_grad() region"
        else:
            where = f"evaluation function {region.name}()"  # type: ignore[union-attr]
        hit = _hit(script, node, target, idle, where)
        if hit is not None:
            yield hit


def _hit(script: Script, node: ast.AST, target: ast.AST, idle: Any,
         where: str) -> Hit | None:
    """The finding for one re-enabling ``node`` (its ``target`` call, the ``idle`` call or
    update it leaves with a graph) inside ``where``, or None."""
    if isinstance(node, ast.Expr) and idle is None:  # a plain switch: it outlives the
        if not _forward_follows(script, node):  # helper's return
            return None  # grad restored for what comes next: training (a validation hook's end)
        return Hit(target, f"torch.set_grad_enabled(True) switches grad on inside {where} "
                           f"and leaves it on after the function returns: what the caller "
                           f"computes next carries a grad_fn and builds graphs that "
                           f"evaluation never uses",
                   fix="save torch.is_grad_enabled() first and restore that value, or use "
                       "`with torch.set_grad_enabled(False):` around the block")
    if isinstance(idle, ast.Assign):
        return Hit(idle, f"this update is computed inside the torch.enable_grad() block at "
                         f"{script.at(node.lineno)}, inside {where}, from a tensor that "
                         f"requires grad: it leaves the block carrying a grad_fn, and a "
                         f"caller that feeds it back chains one graph per pass",
                   fix="compute the update after the block (or from .detach()-ed tensors): "
                       "only the gradient needs grad enabled")
    if idle is not None and (script.call_qualname(idle) or "").endswith("autograd.grad"):
        flag = kwarg(idle, "create_graph")
        return Hit(flag or idle, f"grad is re-enabled inside {where} to compute a gradient "
                                 f"with create_graph=True: the gradient itself carries a "
                                 f"graph, which leaves the block although evaluation never "
                                 f"differentiates it (forces as -dE/dx in validation)",
                   fix="pass create_graph=self.training (a graph of the gradient is needed "
                       "only when a loss on it is backpropagated)")
    if idle is not None and isinstance(node, ast.Expr):
        name = dotted(idle.func) or "the model"
        return Hit(target, f"torch.set_grad_enabled(True) switches grad on inside {where} "
                           f"for the rest of the loop: from the next pass on, {name}(...) "
                           f"at {script.at(idle.lineno)} runs with grad enabled and its "
                           f"output, which no gradient computed here uses, carries a graph "
                           f"that grows with every pass",
                   fix="put only the gradient computation under `with torch.enable_grad():` "
                       "so that grad mode is restored after it")
    if idle is not None:
        name = dotted(idle.func) or "the model"
        fix = f"move {name}(...) out of the block, so that only the gradient computation " \
            f"runs with grad enabled"
        if _grads_on_every_path(script, node):  # the block is needed: the call is the fault
            return Hit(idle, f"{name}(...) runs in the torch.enable_grad() block at "
                             f"{script.at(node.lineno)}, inside {where}, but no gradient "
                             f"computed in the block uses its output: it leaves the block "
                             f"carrying a grad_fn and a graph that evaluation never uses",
                       fix=fix)
        return Hit(target, f"grad is re-enabled inside {where} around {name}(...) at "
                           f"{script.at(idle.lineno)}, whose output no gradient computed "
                           f"in the block uses: it leaves the block carrying a grad_fn and "
                           f"a graph that evaluation never uses", fix=fix)
    flag = _flag_name(target)
    if flag is not None:
        return Hit(target, f"torch.set_grad_enabled({flag}) re-enables grad inside {where}, "
                           f"where {flag} is True: outputs computed here carry a grad_fn and "
                           f"build graphs that evaluation never uses",
                   fix=f"default {flag} to False (or pass it from torch.is_grad_enabled()), "
                       f"so that a caller under torch.no_grad() keeps grad off")
    return Hit(target, f"grad is re-enabled inside {where}: outputs computed here carry a "
                       f"grad_fn and build graphs that evaluation never uses")


def _reenablings(script: Script, nodes: Iterable[ast.AST]
                 ) -> Iterator[tuple[ast.AST, ast.AST, ast.Call | ast.Assign | None]]:
    """(statement, the call or decorator that re-enables grad, None) for each re-enabling
    among ``nodes`` whose block computes a forward and reads no gradient: a ``with
    enable_grad()`` block, a ``set_grad_enabled(True)`` statement (``mode=True`` too), an
    ``@enable_grad()`` decorator. A ``with`` block that reads gradients yields its idle
    forward as the third item, when it has one (:func:`_idle_forward`)."""
    for node in nodes:
        target: ast.AST | None = None
        block: ast.AST | None = None
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if script.grad_context(item.context_expr) is False or \
                        _flag_true_when_disabled(script, node, item.context_expr):
                    target, block = item.context_expr, node
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            q = script.call_qualname(node.value) or ""
            mode = _mode_arg(node.value)
            if q.endswith("set_grad_enabled") and (is_true(mode) or
                                                    _true_when_disabled(script, node, mode)):
                target, block = node.value, script.enclosing_function(node) or script.tree
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:  # @torch.enable_grad() on the whole function
                if script.grad_context(d) is False:
                    target, block = d, node
        if target is None or block is None:
            continue
        if _reads_grads(script, block):
            if isinstance(node, ast.Expr):  # a switch in a loop stays on for the next pass
                loops = script.enclosing_loops(node)
                if not (loops and _within(loops[-1], block)) and \
                        script.enclosing_function(node) is not None:
                    yield node, target, None  # (and after the function returns: judged there)
                    continue
                block = loops[-1] if loops and _within(loops[-1], block) else None
            idle = _idle_forward(script, block) \
                if isinstance(block, (ast.With, ast.AsyncWith, ast.For, ast.While)) else None
            if idle is None and isinstance(block, (ast.With, ast.AsyncWith)):
                idle = _graph_of_gradient(script, block) or _escaping_update(script, block)
            if idle is not None:
                yield node, target, idle
            continue
        # (in a module's own method, ``self.step(x)`` that runs its layers is a forward too)
        if isinstance(block, (ast.With, ast.AsyncWith)) and not _forwards(script, block):
            continue  # nothing computed in the block carries a graph (e.g. an optimizer step)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                not _forwards(script, node):
            continue
        yield node, target, None


def _idle_forward(script: Script, block: ast.AST) -> ast.Call | None:
    """A forward in a re-enabled block that reads gradients, whose output no gradient read
    of the block uses and that the code after the block reads, itself or through what is
    computed from it (``pred = model(x)`` next to ``jn = jacobian_norm(x)`` that runs
    ``autograd.grad``, then ``return pred``): it leaves the block with a ``grad_fn`` for
    nothing. What feeds ``autograd.grad``, a backward or a helper that reads gradients
    (through the block's names, not through ``.detach()``) is no idle forward. The block may
    be the loop around a ``set_grad_enabled(True)`` statement: grad stays on for the next
    pass (a guided sampler's denoiser call)."""
    assigns = [n for n in walk_local(block) if isinstance(n, ast.Assign)]
    readers = _grad_readers(script, block)
    after, detached = _read_after(script, block)
    for a in assigns:
        names = _target_names(a)
        forwards = _forwards(script, a)
        if not names or a in readers or not forwards:
            continue
        derived = set(names)
        for _ in range(3):
            derived |= {t.id for b in assigns if _names(b.value) & derived
                        and not _detached(b.value) for t in b.targets if isinstance(t, ast.Name)}
        if any(_names(r) & derived for r in readers):
            continue  # it feeds the gradient: saliency, an input gradient
        if any(n.id in derived and n.id not in detached for n in after):
            return forwards[0]
    return _escaping_value(script, assigns, readers, after, detached)


def _grad_readers(script: Script, block: ast.AST) -> list[ast.AST]:
    """The simple statements of ``block`` that read gradients (``autograd.grad``, a backward)."""
    return [n for n in walk_local(block) if isinstance(n, ast.stmt) and
            not isinstance(n, (ast.For, ast.While, ast.If, ast.With, ast.Try)) and
            _reads_grads(script, n)]


def _read_after(script: Script, block: ast.AST) -> tuple[list[ast.Name], set[str]]:
    """The names read after ``block`` in its function (or returned from inside it), and the
    names rebound from their own ``.detach()`` after it (:func:`_detached_after`)."""
    func = script.enclosing_function(block)
    after = [n for n in walk_local(func if func is not None else script.tree)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and
             n.lineno > (block.end_lineno or block.lineno)]
    # a return inside the block hands its value to the caller, out of the block too
    after += [n for r in walk_local(block) if isinstance(r, ast.Return) and r.value is not None
              for n in ast.walk(r.value) if isinstance(n, ast.Name)]
    detached = _detached_after(func if func is not None else script.tree,
                               block.end_lineno or block.lineno)
    return after, detached


def _escaping_update(script: Script, block: ast.AST) -> ast.Assign | None:
    """An update computed in a re-enabled block that reads gradients, from a tensor the block
    made require grad (``img = img.clone().requires_grad_(True)``, then ``img = img - lr *
    grad`` after ``grad = autograd.grad(loss, img)``), that feeds no gradient read and leaves the
    block undetached (returned, or read after it): it carries a ``grad_fn`` back to the caller,
    and an iterative caller chains one graph per pass. Not a ``.detach()``-ed update, nor a loss
    that is backpropagated, nor a value made from the gradient alone (``lr * grad.sign()``)."""
    leaves = {n for a in walk_local(block) if isinstance(a, ast.Assign) and _makes_leaf(a.value)
              for n in _target_names(a)}
    leaves |= {dotted(c.func.value) for c in walk_local(block) if isinstance(c, ast.Call) and
               isinstance(parent(c), ast.Expr) and isinstance(c.func, ast.Attribute) and
               c.func.attr == "requires_grad_" and not is_false(c.args[0] if c.args else None)
               and isinstance(c.func.value, ast.Name)}
    if not leaves:
        return None
    readers = _grad_readers(script, block)
    after, detached = _read_after(script, block)
    kept = [a for a in walk_local(block) if isinstance(a, ast.Assign) and a not in readers and
            not _no_graph(a.value)]
    for a in kept:
        names = _target_names(a)
        if len(names) != 1 or names[0] in leaves or not _names(a.value) & leaves:
            continue
        derived = {names[0]}
        for _ in range(3):
            derived |= {n for c in kept if _names(c.value) & derived for n in _target_names(c)}
        if any(_names(r) & derived for r in readers):
            continue  # a loss, or what feeds one: the gradient needs it
        if any(n.id in derived and n.id not in detached and not _read_without_graph(n)
               for n in after):
            return a
    return None


def _makes_leaf(value: ast.AST) -> bool:
    """``x.clone().requires_grad_(True)``, ``torch.zeros(..., requires_grad=True)``."""
    for c in ast.walk(value):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and \
                c.func.attr == "requires_grad_" and not is_false(c.args[0] if c.args else None):
            return True
        if isinstance(c, ast.Call) and is_true(kwarg(c, "requires_grad")):
            return True
    return False


def _grads_on_every_path(script: Script, block: ast.AST) -> bool:
    """Every pass through the ``with`` block computes a gradient: a statement of its own body
    (not under a test, loop or ``try`` of the block) reads gradients, and no ``return`` leaves
    the block before it. The re-enabling is then needed, and the line to change is the value
    that leaves the block with a graph; a block that may end without a gradient
    (``if labels is None: return logits``, a guidance taken only when asked) is itself the
    fault."""
    branching = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)
    for stmt in getattr(block, "body", []):
        leaves = any(isinstance(n, (ast.Return, ast.Raise)) for n in walk_local(stmt))
        if not isinstance(stmt, branching) and _reads_grads(script, stmt):
            return True
        if leaves:
            return False
    return False


_NO_GRAPH = {"argmax", "argmin", "argsort", "long", "int", "bool", "eq", "ne", "gt", "lt", "ge",
             "le", "item", "tolist", "numpy", "detach", "size", "dim"}


def _escaping_value(script: Script, assigns: list[ast.Assign], readers: list[ast.AST],
                    after: list[ast.Name], detached: set[str]) -> ast.Call | None:
    """A call in a re-enabled block that reads gradients, computed from a forward's output of
    the block, that feeds no gradient read and leaves the block (``probs =
    torch.softmax(logits, 1)`` beside the saliency taken from ``logits``, then ``return
    probs``): its result carries a ``grad_fn`` out of evaluation. Not a value without a graph
    (indices, a comparison, ``.item()``, ``.detach()``), nor one read after the block only
    through ``.detach()``/``.item()``."""
    made: set[str] = set()
    for a in assigns:
        if a not in readers and _forwards(script, a):
            made.update(_target_names(a))
    for _ in range(3):
        made |= {n for b in assigns if b not in readers and _names(b.value) & made
                 and not _detached(b.value) for n in _target_names(b)}
    for b in assigns:
        names = _target_names(b)
        if len(names) != 1 or b in readers or _forwards(script, b) or \
                not isinstance(b.value, ast.Call) or not (_names(b.value) & made) or \
                _no_graph(b.value):
            continue
        derived = {names[0]}
        for _ in range(3):
            derived |= {n for c in assigns if _names(c.value) & derived for n in _target_names(c)}
        if any(_names(r) & derived for r in readers):
            continue  # it feeds the gradient
        if any(n.id == names[0] and n.id not in detached and not _read_without_graph(n)
               for n in after):
            return b.value
    return None


def _no_graph(value: ast.AST) -> bool:
    """A value with no graph: ``.argmax(1)``, ``.long()``, ``.item()``, ``x.data``-based."""
    if any(isinstance(n, ast.Attribute) and n.attr == "data" for n in ast.walk(value)):
        return True
    f = value.func if isinstance(value, ast.Call) else None
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in _NO_GRAPH or name in ("float", "len") or _detached(value)


def _read_without_graph(name: ast.Name) -> bool:
    """``probs.detach()``, ``probs.item()``: a read after the block that takes no graph along."""
    up = parent(name)
    return isinstance(up, ast.Attribute) and up.attr in ("detach", "item", "tolist", "shape",
                                                           "data", "size", "dtype")


def _forwards(script: Script, node: ast.AST) -> list[ast.Call]:
    """The forwards ``node`` runs: a model's call, and in a module's own method
    ``self._logits(x)`` or ``self(x)``."""
    return forward_calls(script, node) or [
        c for c in walk_local(node) if isinstance(c, ast.Call) and (
            self_attr(c.func) and runs_layers(script, c) or
            isinstance(c.func, ast.Name) and c.func.id == "self" and
            script.graph.in_module_class(c))]


def _detached_after(scope: ast.AST, line: int) -> set[str]:
    """Names rebound from their own ``.detach()`` after ``line`` (``a, b = a.detach(),
    b.detach()`` for evaluation): what leaves the function through them carries no graph."""
    out = set()
    for n in walk_local(scope):
        if isinstance(n, ast.Assign) and n.lineno > line and len(n.targets) == 1:
            for te, ve in assigned_pairs(n.targets, n.value):
                if isinstance(te, ast.Name) and _detached(ve) and te.id in _names(ve):
                    out.add(te.id)
    return out


def _target_names(a: ast.Assign) -> list[str]:
    """The names one assignment binds: ``out = ...`` or ``logits, fmap = ...``; empty for other
    targets (an attribute, a subscript, several ``=``)."""
    if len(a.targets) != 1:
        return []
    t = a.targets[0]
    elts = t.elts if isinstance(t, ast.Tuple) else [t]
    return [e.id for e in elts if isinstance(e, ast.Name)] \
        if all(isinstance(e, ast.Name) for e in elts) else []


def _graph_of_gradient(script: Script, block: ast.With | ast.AsyncWith) -> ast.Call | None:
    """``torch.autograd.grad(..., create_graph=True)`` (a literal True) in ``block`` whose result
    is read after the block: a graph of the gradient that leaves it."""
    func = script.enclosing_function(block)
    after = {n.id for n in walk_local(func if func is not None else script.tree)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and
             n.lineno > (block.end_lineno or block.lineno)}
    for stmt in walk_local(block):
        if not isinstance(stmt, ast.Assign):
            continue
        for sub in ast.walk(stmt.value):
            if isinstance(sub, ast.Call) and (script.call_qualname(sub) or "").endswith(
                    "autograd.grad") and is_true(kwarg(sub, "create_graph")) and \
                    any(isinstance(t, ast.Name) and t.id in after for t in stmt.targets):
                return sub
    return None


def _detached(value: ast.AST) -> bool:
    """``x.detach()...`` or ``x.detach().requires_grad_(True)``: a new leaf, no graph carried."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if value.func.attr in ("detach", "item", "numpy", "tolist"):
            return True
        value = value.func.value
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _foreign_helpers(script: Script) -> Iterator[Hit]:
    """A helper of another project file that re-enables grad, called here under no_grad:
    reported at the call (the line in this file that runs it)."""
    if not script.project_imports or not (
            imports_mention(script, "enable_grad") or imports_mention(script, "set_grad_enabled")):
        return
    for call in script.calls:
        f = call.func
        head = f.id if isinstance(f, ast.Name) else dotted(f.value) \
            if isinstance(f, ast.Attribute) else None
        if head is None or head.split(".")[0] not in script.project_imports:
            continue
        if not script.grad_disabled(call) or _in_inference_mode(script, call):
            continue
        targets = [t for t in script.targets(call) if t.script is not script]
        if not targets:
            continue
        for t in targets[:2]:
            found = next((r for r in _reenablings(t.script, [t.func, *walk_local(t.func)])
                          if r[2] is None), None)
            if found is None:
                continue
            name = t.func.name
            yield Hit(call, f"{name}() re-enables grad ({t.script.path.rsplit('/', 1)[-1]}:"
                            f"{found[1].lineno}) and is called here under torch.no_grad(): "
                            f"what it computes carries a grad_fn and builds graphs that "
                            f"evaluation never uses",
                      fix=f"remove the enable_grad/set_grad_enabled(True) from {name}(), or "
                          f"restore the caller's grad mode before it returns")
            break


def _in_inference_mode(script: Script, node: ast.AST) -> bool:
    """Whether the innermost grad context around ``node`` is ``torch.inference_mode()``: there
    re-enabling grad records nothing (tensors made under inference mode never get a grad_fn,
    https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)."""
    n = node
    while (p := parent(n)) is not None:
        contexts = []
        if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body:
            contexts = [i.context_expr for i in p.items]
        elif isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not p.args:
            contexts = list(p.decorator_list)
        for c in contexts:
            if script.grad_context(c) is True:
                q = script.call_qualname(c) if isinstance(c, ast.Call) else script.qualname(c)
                return "inference_mode" in (q or "")
        n = p
    return False


def _mode_arg(call: ast.Call) -> ast.expr | None:
    """``set_grad_enabled``'s ``mode``: its first argument or ``mode=``."""
    return call.args[0] if call.args else kwarg(call, "mode")


def _flag_name(target: ast.AST) -> str | None:
    """The parameter name of ``set_grad_enabled(flag)`` when the re-enabling is such a call."""
    if isinstance(target, ast.Call) and (dotted(target.func) or "").endswith("set_grad_enabled"):
        mode = _mode_arg(target)
        if isinstance(mode, ast.Name):
            return mode.id
    return None


def _flag_true_when_disabled(script: Script, node: ast.AST, expr: ast.expr) -> bool:
    """``with torch.set_grad_enabled(track_gradients):`` whose flag is a parameter defaulting
    to True, in a method a ``torch.no_grad()`` caller runs without passing it (sbi's
    ``log_prob(theta, x, track_gradients=True)``)."""
    if not isinstance(expr, ast.Call) or not (script.call_qualname(expr) or "").endswith(
            "set_grad_enabled"):
        return False
    mode = _mode_arg(expr)
    return mode is not None and not is_true(mode) and _true_when_disabled(script, node, mode)


def _true_when_disabled(script: Script, node: ast.AST, mode: ast.AST | None) -> bool:
    """``torch.set_grad_enabled(grad_mode)`` in a helper with ``grad_mode = not eval`` and
    ``def prepare_data(batch, eval=False)``: the flag is True at a call made under
    ``torch.no_grad()`` that leaves ``eval`` at its default (NJUNMT-pytorch#16)."""
    func = script.enclosing_function(node)
    if mode is None or func is None or is_false(mode):
        return False
    if isinstance(mode, ast.Name):  # a local name assigned once above: its expression
        values = [n.value for n in walk_local(func) if isinstance(n, ast.Assign) and
                  n.lineno < node.lineno and any(isinstance(t, ast.Name) and t.id == mode.id
                                                 for t in n.targets)]
        mode = values[0] if len(values) == 1 else mode
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if params and params[0] == "self":
        params = params[1:]
    for site in _sites(script, func):
        if not script.grad_disabled(site):
            continue
        env = defaults(func)
        env.update(bind_arguments(params, site))
        if const_eval(mode, env=env) is True:
            return True
    return False


def _disabled_caller(script: Script, node: ast.AST) -> ast.AST | bool | None:
    """Where ``node`` runs with grad disabled: True when its own context disables it, else
    the first call of its function made under ``torch.no_grad()`` (one such caller is
    enough: a metric helper called from training and from evaluation re-enables grad for the
    evaluation), else None."""
    start = parent(node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
            script.grad_disabled(node):
        return True
    func = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
        script.enclosing_function(start)
    if func is None:
        return None
    for site in _sites(script, func):
        if script.grad_disabled(site):
            return site
    return None


def _forward_follows(script: Script, switch: ast.stmt) -> bool:
    """A forward runs after the ``set_grad_enabled(True)`` statement while the code around
    meant grad off: later in its own function, or after a call of its function made with grad
    disabled (the next statements, or the rest of a loop's body, which runs again)."""
    if _forward_after(script, switch):
        return True
    func = script.enclosing_function(switch)
    if func is None:
        return False
    return any(script.grad_disabled(site) and _forward_after(script, site)
               for site in _sites(script, func))


def _forward_after(script: Script, node: ast.AST) -> bool:
    """A forward in the statements that run after ``node`` in its function: the following
    statements of each enclosing block, and the whole body of each enclosing loop."""
    n = node
    if isinstance(node, ast.Call):  # model(helper(x)): the forward around the call runs after
        stmt = node
        while not isinstance(stmt, ast.stmt) and parent(stmt) is not None:
            stmt = parent(stmt)
        if any(f is not node and any(sub is node for sub in ast.walk(f))
               for f in forward_calls(script, stmt)):
            return True
    while (p := parent(n)) is not None and not isinstance(
            p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(p, field, None)
            if isinstance(stmts, list) and n in stmts:
                rest = stmts if isinstance(p, (ast.For, ast.AsyncFor, ast.While)) \
                    else stmts[stmts.index(n) + 1:]  # a loop's body runs again
                if any(_runs_forward(script, st) for st in rest):
                    return True
        n = p
    if isinstance(p, ast.Module):
        stmts = p.body
        return n in stmts and any(_runs_forward(script, st)
                                  for st in stmts[stmts.index(n) + 1:])
    if p is not None and isinstance(n, ast.stmt):
        body = getattr(p, "body", [])
        return n in body and any(_runs_forward(script, st) for st in body[body.index(n) + 1:])
    return False


def _runs_forward(script: Script, stmt: ast.AST) -> bool:
    """The statement calls a model, or a function of the file that does
    (``loss, logits = compute_loss(model, x, y)``)."""
    if forward_calls(script, stmt):
        return True
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        func = script.callee(call)
        if func is not None and forward_calls(script, func):
            return True
    return False


def _sites(script: Script, func: ast.AST) -> list[ast.Call]:
    """The calls of ``func`` in the file, also an object's ``__call__``/``forward`` run by
    calling the object (``scaler(x)``)."""
    return list(script.call_sites(func)[:8]) + script.graph.instance_sites(func)[:8]


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return any(sub is node for sub in walk_local(outer))


def _reads_grads(script: Script, block: ast.AST) -> bool:
    """The block, or a function it calls, reads gradients; a called function that re-enables
    grad itself (``@torch.enable_grad()`` on a normals-from-density helper) needs no caller to
    do it, and does not count. A module called in the block counts by its ``forward``
    (``energy, forces = self.model(pos)`` with the forces from ``autograd.grad`` in it)."""
    nodes = script.reachable(block)
    forwards = [t.func for c in walk_local(block) if isinstance(c, ast.Call)
                for t in script.graph.instance_targets(c)[:2] if t.script is script]
    for f in forwards[:4]:
        nodes += [n for n in script.reachable(f) if all(n is not m for m in nodes)]
    for n in nodes:
        if n is not block and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                script.grad_context(d) is False for d in n.decorator_list):
            continue
        for sub in walk_local(n):
            if is_backward(sub) or (isinstance(sub, ast.Attribute) and sub.attr == "grad"):
                return True
            if isinstance(sub, ast.Call) and (script.call_qualname(sub) or "").endswith(
                    "autograd.grad"):
                return True
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and \
                    sub.func.id == "closure":
                return True  # an optimizer's closure runs backward
    return False
