"""TG205 gradient-cut: the loss reaches the model only through a cut, so nothing learns.

The loss that ``backward()`` runs on is built from ``output.detach()``, ``output.data``,
``output.item()``, ``output.argmax(1)`` or an integer cast, a NumPy round trip, or is re-wrapped as a new leaf with
``torch.tensor(value, requires_grad=True)`` (the usual answer to "element 0 of tensors does not
require grad and does not have a grad_fn", which silences the error and trains nothing:
https://discuss.pytorch.org/t/element-0-of-tensors-does-not-require-grad-and-does-not-have-a-grad-fn/32908).
Silent when any uncut path from the loss to a model output or to ``parameters()`` exists.
``float(x)``/``int(x)`` are cuts too (REINFORCE written with ``-float(log_prob) * ret``); values
are followed through tuple unpacking, loop variables (``zip`` parts), lists filled with
``append``, and a helper's parameters (what the file's calls pass); the backward may sit in a
function the training loop calls.

Per model, when only some terms of the loss are cut: a model that an optimizer stepped after
the backward holds, reached only through cuts, gets no gradient (an actor's policy mean sent
through NumPy and summed with the critic's loss: https://discuss.pytorch.org/t/74548).

Per term, when the loss as a whole reaches a model: a summed term that reaches no model
except through a cut of a value (:mod:`trainguard.lint.terms`; a policy term built from
``log_prob.item()`` next to the value term of the same two-headed network) adds no gradient.

A submodule built in ``__init__`` that nothing ever calls (:mod:`trainguard.lint.unused`) gets
no gradient either: reported where ``__init__`` builds it.

Inside a module's ``forward``, a submodule with parameters whose output reaches the returned
value only through a cut (:mod:`trainguard.lint.cuts`) never learns either: reported at the cut.

A loss rebuilt from graph values (:mod:`trainguard.lint.rebuilds`): ``torch.tensor(log_probs)``,
``torch.as_tensor``, ``torch.Tensor(...)`` or a NumPy round trip on a list whose elements a
model computed copies their numbers into a new leaf with no ``grad_fn``
(https://pytorch.org/docs/stable/generated/torch.tensor.html: "torch.tensor() always copies
data"). When the tensor ``backward()`` runs on is built from it and nothing else there carries a
graph, reported at the rebuild; silent when another term carries a graph (a rebuilt target is a
stop-gradient) or part of the loss cannot be followed. ``torch.stack``/``torch.cat`` keep it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from trainguard.lint.astutil import dotted, is_true, kwarg
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.cuts import CUT_ATTRS, NEW_LEAF, forward_cuts
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.events import events
from trainguard.lint.optimizers import held_modules
from trainguard.lint.rebuilds import REBUILD, loss_sources
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward
from trainguard.lint.terms import summed_terms
from trainguard.lint.unused import unused_submodules
from trainguard.lint.astutil import parent, walk_local

CODE = "TG205"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_CUT_ATTRS, _NEW_LEAF = CUT_ATTRS, NEW_LEAF
_NUMBER_CASTS = {"float", "int"}  # float(log_prob): a Python number, no graph


def check(script: Script) -> Iterator[Hit]:
    yield from _rebuilt_losses(script)
    seen: set[int] = set()
    for loop in training_loops(script):
        for call in _backwards_run(script, loop):
            if id(call) in seen:
                continue
            seen.add(id(call))
            target = call.func.value  # type: ignore[attr-defined]
            if isinstance(target, ast.Call) and target.args and \
                    (script.key(target.func) or "").endswith("scale"):
                target = target.args[0]
            uncut, cuts = _trace(script, target, call, depth=14)
            if cuts and not uncut:
                cut, how = cuts[0]
                if _rebuild_reported(script, target, cut):
                    continue
                yield Hit(cut, f"the loss that backward() runs on at {script.at(call.lineno)} "
                               f"reaches the model only through {how}: no gradient flows to the "
                               f"parameters, so they never change")
            else:
                hits = list(_cut_models(script, loop, call, target, seen_cut=bool(cuts)))
                if not hits and cuts:
                    term = _cut_term(script, call, target)
                    hits = [term] if term is not None else []
                yield from hits
    if not script.may_reach("backward") or "forward" not in script.source:
        return
    for u in unused_submodules(script):
        yield Hit(u.assign, f"{u.cls.name}.__init__ builds self.{u.attr}, a submodule with "
                            f"parameters, but nothing ever calls it: its parameters get no "
                            f"gradient, so they never change",
                  fix=f"call self.{u.attr} in forward, or do not build it (guard it with the "
                      f"config switch meant to turn it on)")
    for fc in forward_cuts(script):
        names = " and ".join(f"self.{a}" for a in fc.attrs)
        one = len(fc.attrs) == 1
        yield Hit(fc.cut, f"what {names} {'computes reaches' if one else 'compute reach'} what "
                          f"{fc.cls.name}.forward() returns only through {fc.how}: no gradient "
                          f"flows to {'its' if one else 'their'} parameters, so they never "
                          f"change",
                  fix=f"keep {names} in the graph (drop the cut), or freeze "
                      f"{'it' if one else 'them'} (requires_grad_(False)) if not meant to learn")


def _backwards_run(script: Script, loop: ast.AST) -> list[ast.Call]:
    """The backward calls one iteration of ``loop`` runs: in its body, or in a same-file
    function or method it calls (two calls deep: ``self.update(batch)`` in ``fit``)."""
    out: list[ast.Call] = []
    frontier, seen = [loop], {id(loop)}
    for level in range(3):
        nxt = []
        for node in frontier:
            for call in walk_local(node):
                if not isinstance(call, ast.Call):
                    continue
                if is_backward(call):
                    out.append(call)
                elif level < 2:
                    for t in script.targets(call):
                        if t.script is script and not t.instance and id(t.func) not in seen:
                            seen.add(id(t.func))
                            nxt.append(t.func)
        frontier = nxt
    return out


def _rebuild_reported(script: Script, target: ast.AST, cut: ast.AST) -> bool:
    """_rebuilt_losses reports this cut: a list of graph values rebuilt into a new tensor
    that makes the whole loss (backward raises rather than training nothing)."""
    found = loss_sources(script, target)
    return not found.graph and not found.unknown and any(r is cut for r, _ in found.rebuilds)


def _rebuilt_losses(script: Script) -> Iterator[Hit]:
    """The loss that backward() runs on is built only from a tensor rebuilt out of graph
    values (:mod:`trainguard.lint.rebuilds`): reported at the rebuild."""
    if "backward" not in script.source or not any(
            (script.call_qualname(c) or "") in REBUILD and c.args and
            not isinstance(c.args[0], ast.Constant) for c in script.calls):
        return
    done: set[int] = set()
    for call in script.calls:
        if not is_backward(call) or not isinstance(call.func, ast.Attribute):
            continue
        target = call.func.value
        if isinstance(target, ast.Call) and target.args and \
                (dotted(target.func) or "").endswith("scale"):
            target = target.args[0]
        found = loss_sources(script, target)
        if found.graph or found.unknown:
            continue
        for rebuild, box in found.rebuilds:
            if id(rebuild) in done:
                continue
            done.add(id(rebuild))
            how = script.call_qualname(rebuild) or "torch.tensor"
            yield Hit(rebuild, f"{how}(...) copies the values in {box} into a new tensor cut "
                               f"from the graph, and the loss that backward() runs on at "
                               f"{script.at(call.lineno)} is built from it: the parameters get "
                               f"no gradient, and backward fails with 'element 0 of tensors "
                               f"does not require grad' when nothing else carries a graph",
                      fix=f"keep the graph: torch.stack({box}) (or torch.cat) instead of "
                          f"rebuilding a tensor from the values")


def _cut_models(script: Script, loop: ast.AST, call: ast.Call, target: ast.AST, *,
                seen_cut: bool) -> Iterator[Hit]:
    """Per model: a model that an optimizer stepped after this backward holds, reached by the
    loss only through cuts while other terms reach other models (an actor whose policy mean
    went through NumPy, summed with a critic's loss), or only through a value computed under
    ``torch.no_grad()`` (an encoder whose features feed the critic's loss but were computed
    without a graph, while ``encoder_opt.step()`` follows). A GAN's discriminator step, which
    detaches the generator that its optimizer does not hold, stays silent. Unless the loss
    showed a cut already (``seen_cut``), only where the steps hold two models or more."""
    evs = events(script, loop.body)  # type: ignore[attr-defined]
    at = next((i for i, e in enumerate(evs) if e.kind == "backward" and e.node is call), None)
    if at is None:
        return
    stepped: list[str] = []
    for e in evs[at + 1:]:
        if e.kind == "backward":
            break
        if e.kind == "step" and e.key:
            stepped.append(e.key)
    held = {opt: sorted(held_modules(script, opt) or ()) for opt in stepped}
    if not seen_cut and sum(map(len, held.values())) < 2:
        return
    for opt in stepped:
        for model in held[opt]:
            others = frozenset(m for ms in held.values() for m in ms if m != model)
            focus = _Focus(model, others, _aliases(script, model))
            uncut, cuts = _trace(script, target, call, depth=12, focus=focus)
            if cuts and not uncut:
                cut, how = cuts[0]
                if _rebuild_reported(script, target, cut):
                    continue
                no_grad = how.startswith("a value computed under")
                yield Hit(cut, f"the loss that backward() runs on at {script.at(call.lineno)} "
                               f"reaches {model} only through {how}: {opt}.step() finds no "
                               f"gradient for {model}'s parameters, so they never change",
                          fix=f"compute it outside the no_grad block (keep only values meant "
                              f"as fixed targets under it), or drop {opt} if {model} is meant "
                              f"to stay frozen" if no_grad else None)
                return


def _cut_term(script: Script, call: ast.Call, target: ast.AST) -> Hit | None:
    """A summed term of the loss (:mod:`trainguard.lint.terms`) that reaches no model except
    through cuts while the loss as a whole reaches one uncut: the term adds no gradient, so what
    it was computed from (a policy head whose log-probabilities went through ``.item()``, next
    to a value loss that trains the shared trunk) does not learn from it. A term that trains
    one model and is cut from another (an actor's term with the critic's advantage detached)
    is not one. A cut of a value (``.item()``, ``float()``, ``.detach()``) must be among the
    term's cuts: a new tensor made from a value the file does not show is not enough."""
    terms = summed_terms(script, target, call)
    if len(terms) < 2:
        return None
    for term, where in terms:
        uncut, cuts = _trace(script, term, where, depth=12)
        if cuts and not uncut and any(not how.startswith("a new tensor") for _, how in cuts):
            cut, how = cuts[0]
            if _rebuild_reported(script, target, cut):
                return None
            text = ast.unparse(term)
            text = text if len(text) <= 40 else "one of its terms"
            return Hit(cut, f"the term {text} of the loss that backward() runs on at "
                            f"{script.at(call.lineno)} reaches the model only through {how}: it "
                            f"adds no gradient, so the layers it was computed from do not learn "
                            f"from it",
                       fix="use the tensor itself in this term, not a copy cut from the graph "
                           "(.item(), float(), .detach()); torch.stack a list of tensors")
    return None


class _Focus(NamedTuple):
    """The model a trace looks for, and the other models the same steps update (whose inputs
    are followed: an encoder feeding a critic)."""

    model: str
    others: frozenset[str]
    aliases: frozenset[str]  # other keys bound to it (``self.policy = policy``)


def _aliases(script: Script, model: str) -> frozenset[str]:
    """Keys the file assigns ``model`` to (``self.policy = policy`` for an optimizer built from
    ``policy.parameters()``), and the keys ``model`` was assigned from: by name, file-wide (an
    alias too many only keeps the rule silent)."""
    found = set()
    for key, values in script.assignments.items():
        if any(script.key(v) == model for v in values):
            found.add(key)
    found.update(k for v in script.assignments.get(model, ()) if (k := script.key(v)))
    return frozenset(found - {model})


def _trace(script: Script, expr: ast.AST, at: ast.AST, depth: int,  # type: ignore[no-untyped-def]
           focus: "_Focus | None" = None):
    """(reaches a model output or parameters uncut, [(cut node, description)]); with
    ``focus``, only that model counts, and only a path seen to reach it: what cannot be
    followed is taken as not reaching it; the inputs of the other stepped models it names are
    followed (the model in focus may feed them). Memoised per expression (a value reached at a
    smaller remaining depth may have been taken as connected: that only keeps it silent)."""
    memo = script.__dict__.setdefault("_tg205_trace", {})
    k = (id(expr), focus)
    if k not in memo:
        memo[k] = (focus is None, [])  # a cycle through this value: unknown, connected
        memo[k] = _trace_once(script, expr, at, depth, focus)
    return memo[k]


def _trace_once(script: Script, expr: ast.AST, at: ast.AST, depth: int,  # type: ignore
                focus: "_Focus | None" = None):
    if depth == 0:
        return focus is None, []
    if isinstance(expr, ast.Name):
        if not isinstance(expr.ctx, ast.Load):
            return False, []  # a target (``for _ in range(n)``): its value is traced where read
        if expr.id in script.aliases:
            return False, []  # a module (nn, F, torch): not a value on the loss's path
        value = last_assignment(expr.id, at)
        if value is None:
            value = _unpacked_or_iterated(script, expr.id, at)
            if value is not None and _loop_target(expr.id, at) and _opaque(script, value):
                return False, []  # a batch of a loader handed in: no parameters
        if value is None:
            args = _arguments_for(script, expr.id, at)
            if args:  # a helper's parameter: what its callers in this file pass
                uncut, cuts = False, []
                for a in args:
                    u, c = _trace(script, a, a, depth - 1, focus)
                    uncut, cuts = uncut or u, cuts + c
                return uncut, cuts
            # a function parameter or a global might carry a graph: assumed connected, unless
            # a number by its default or annotation (``gamma=0.99``, ``gamma: float``)
            return focus is None and not _loop_target(expr.id, at) and \
                not _number_parameter(expr.id, at), []
        uncut, cuts = _trace(script, value, value, depth - 1, focus)
        block = _no_grad_block(script, value) if focus is not None else None
        if block is not None:
            if uncut or cuts:  # computed without a graph: a cut for the model it came from
                return False, [(value, f"a value computed under {ast.unparse(block)} "
                                       f"({script.at(block.lineno)})")] + cuts
            return False, []
        for item in _stored_items(expr.id, value):
            u, c = _trace(script, item, item, depth - 1, focus)
            uncut, cuts = uncut or u, cuts + c
        return uncut, cuts
    if isinstance(expr, ast.Call):
        q = script.call_qualname(expr) or ""
        if q in _NEW_LEAF and expr.args:
            inner_uncut, inner_cuts = _trace(script, expr.args[0], at, depth - 1, focus)
            if inner_uncut or inner_cuts or is_true(kwarg(expr, "requires_grad")):
                return False, [(expr, f"a new tensor made by {q.rsplit('.', 1)[-1]}(...)")] + \
                    inner_cuts
            return False, []
        if isinstance(expr.func, ast.Name) and expr.func.id in _NUMBER_CASTS and \
                len(expr.args) == 1 and expr.func.id not in script.functions:
            uncut, cuts = _trace(script, expr.args[0], at, depth - 1, focus)
            if uncut or cuts:
                return False, [(expr, f"{expr.func.id}(), a Python number")] + cuts
            return False, []
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _CUT_ATTRS:
            uncut, cuts = _trace(script, expr.func.value, at, depth - 1, focus)
            if uncut or cuts:
                return False, [(expr, f".{expr.func.attr}()")] + cuts
            return False, []
        k = script.key(expr.func)
        if k and k != "self" and script.is_model(k):
            if focus is None or k == focus.model or k in focus.aliases:
                return True, []
            if k not in focus.others:
                return False, []
            # another stepped model: the one in focus may feed it (an encoder's features)
            uncut, cuts = False, []
            for a in [*expr.args, *(kw.value for kw in expr.keywords)]:
                u, c = _trace(script, a, at, depth - 1, focus)
                uncut, cuts = uncut or u, cuts + c
            return uncut, cuts
        called = script.targets(expr)
        if called:
            # a helper (``gan_loss(D, fake, True)``): what it returns, with its parameters
            # taken as connected (the caller's arguments are traced on their own)
            target = called[0]
            if target.script is not script:
                return focus is None, []
            rets = [n for n in ast.walk(target.func) if isinstance(n, ast.Return)
                    and n.value is not None]
            any_uncut, all_cuts = not rets, []
            for r in rets:
                uncut, cuts = _trace(script, r.value, r, depth - 1, focus)
                any_uncut |= uncut
                all_cuts.extend(cuts)
            return any_uncut, all_cuts
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("parameters",
                                                                       "named_parameters"):
            return focus is None or script.key(expr.func.value) in (focus.model,
                                                                     *focus.aliases), []
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        uncut, cuts = _trace(script, expr.value, at, depth - 1, focus)
        if uncut or cuts:
            return False, [(expr, ".data")] + cuts
        return False, []
    any_uncut, all_cuts = False, []
    children = list(ast.iter_child_nodes(expr))
    if isinstance(expr, ast.Call):
        children = [c for c in children if c is not expr.func] + (
            [expr.func.value] if isinstance(expr.func, ast.Attribute) else [])
    for child in children:
        if isinstance(child, (ast.expr_context, ast.keyword)):
            child = child.value if isinstance(child, ast.keyword) else None  # type: ignore
            if child is None:
                continue
        uncut, cuts = _trace(script, child, at, depth, focus)
        any_uncut |= uncut
        all_cuts.extend(cuts)
    return any_uncut, all_cuts


_NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
            "torch.autograd.inference_mode", "torch.autograd.grad_mode.no_grad"}


def _no_grad_block(script: Script, node: ast.AST) -> ast.AST | None:
    """The ``torch.no_grad()``/``torch.inference_mode()`` item of a ``with`` block around
    ``node`` in its own function, or None. (Only those: ``set_grad_enabled(flag)`` may enable
    grad, and a function's callers are not read here.)"""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef, ast.Lambda)):
        if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body:
            for item in p.items:
                q = script.call_qualname(item.context_expr) \
                    if isinstance(item.context_expr, ast.Call) else None
                if q in _NO_GRAD and not (item.context_expr.args and  # type: ignore
                                          not is_true(item.context_expr.args[0])):  # type: ignore
                    return item.context_expr
        n = p
    return None


def _unpacked_or_iterated(script: Script, name: str, at: ast.AST) -> ast.expr | None:
    """Where ``name`` gets its value when no plain assignment gives it: the whole value of a
    tuple assignment (``log_probs, rewards = run_episode(policy)``), or the iterable of the
    ``for`` loop (or comprehension) that binds it (``for lp, g in zip(log_probs, returns)``).
    Tracing the whole value over-approximates: any uncut path in it keeps the loss connected."""
    n = at
    while (n := parent(n)) is not None:
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
            return _iterated(name, n.target, n.iter)
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for g in n.generators:
                if any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(g.target)):
                    return _iterated(name, g.target, g.iter)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
    scope = n if n is not None else None
    if scope is None:
        return None
    line = at.lineno  # type: ignore[attr-defined]
    best: tuple[int, ast.expr] | None = None
    for lineno, t, value in _tuple_assignments(scope).get(name, ()):
        if lineno >= line or best is not None and lineno <= best[0]:
            continue
        names = [isinstance(e, ast.Name) and e.id == name for e in t.elts]
        v = value
        if isinstance(v, (ast.Tuple, ast.List)) and len(v.elts) == len(t.elts):
            v = v.elts[names.index(True)]  # a, b = [], []
        else:
            v = _returned_part(script, v, names.index(True), len(t.elts)) or v
        best = (lineno, v)
    return best[1] if best else None


def _tuple_assignments(scope: ast.AST) -> dict[str, list]:
    """name -> [(line, tuple target, value)] for the tuple assignments of a scope."""
    table = getattr(scope, "_tg_tuple_assigns", None)
    if table is None:
        table = {}
        for sub in walk_local(scope):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, (ast.Tuple, ast.List)):
                        for e in t.elts:
                            if isinstance(e, ast.Name):
                                table.setdefault(e.id, []).append((sub.lineno, t, sub.value))
        scope._tg_tuple_assigns = table  # type: ignore[attr-defined]
    return table


def _opaque(script: Script, it: ast.expr) -> bool:
    """A loop's iterable that is a parameter nothing in the file binds (``for x, y in
    batches`` with ``batches`` handed in from elsewhere)."""
    return isinstance(it, ast.Name) and last_assignment(it.id, it) is None and \
        _unpacked_or_iterated(script, it.id, it) is None and not _arguments_for(script, it.id, it)


def _arguments_for(script: Script, name: str, at: ast.AST) -> list[ast.expr]:
    """The arguments every same-file call passes for parameter ``name`` of the function
    around ``at`` (none when some call cannot be bound, or nothing in the file calls it)."""
    func = script.enclosing_function(at)
    if func is None or isinstance(func, ast.Lambda):
        return []
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    if name not in names or name in ("self", "cls"):
        return []
    out = []
    for site in script.call_sites(func)[:6]:
        params = names[1:] if names[0] in ("self", "cls") and \
            isinstance(site.func, ast.Attribute) else names
        bound = bind_arguments(params, site)
        if name not in bound:
            return []
        out.append(bound[name])
    return out


def _number_parameter(name: str, at: ast.AST) -> bool:
    n = at
    while (n := parent(n)) is not None:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            args = [*a.posonlyargs, *a.args]
            defaults = dict(zip([x.arg for x in args[len(args) - len(a.defaults):]],
                                a.defaults))
            defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d})
            for x in [*args, *a.kwonlyargs]:
                if x.arg == name:
                    d = defaults.get(name)
                    return isinstance(d, ast.Constant) and isinstance(d.value, (int, float)) \
                        or dotted(x.annotation) in ("int", "float")
            return False
    return False


def _returned_part(script: Script, call: ast.expr, index: int, size: int) -> ast.expr | None:
    """``a, b = helper(...)`` with a same-file helper whose every ``return`` is a tuple of
    ``size`` values: the expression it returns in place ``index`` (one ``return``)."""
    if not isinstance(call, ast.Call):
        return None
    called = script.targets(call)
    if len(called) != 1 or called[0].script is not script:
        return None
    rets = [n.value for n in walk_local(called[0].func) if isinstance(n, ast.Return)]
    if len(rets) == 1 and isinstance(rets[0], ast.Tuple) and len(rets[0].elts) == size:
        return rets[0].elts[index]
    return None


def _iterated(name: str, target: ast.AST, it: ast.expr) -> ast.expr:
    """The part of a loop's iterable that ``name`` takes: ``for lp, g in zip(a, b)`` gives
    ``b`` to ``g``; ``for i, x in enumerate(xs)`` gives ``xs`` to ``x`` and a number to ``i``."""
    func = dotted(it.func) if isinstance(it, ast.Call) else None
    if isinstance(target, ast.Tuple) and func in ("zip", "enumerate"):
        parts = list(it.args) if func == "zip" else [ast.Constant(0), *it.args[:1]]  # type: ignore
        if len(parts) == len(target.elts):
            for t, part in zip(target.elts, parts):
                if any(isinstance(x, ast.Name) and x.id == name for x in ast.walk(t)):
                    return _iterated(name, t, part) if isinstance(t, ast.Tuple) else part
    return it


def _stored_items(name: str, value: ast.AST) -> list[ast.expr]:
    """For a container built empty (``log_probs = []``): what is later appended, inserted or
    added into it in the same function (``log_probs.append(dist.log_prob(a))``)."""
    if not (isinstance(value, (ast.List, ast.Tuple)) and not value.elts):
        return []
    scope = value
    while (p := parent(scope)) is not None and not isinstance(
            p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        scope = p
    if p is None:
        return []
    table = getattr(p, "_tg_stored", None)
    if table is None:
        table = {}
        for c in walk_local(p):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and \
                    c.func.attr in ("append", "insert", "extend") and \
                    isinstance(c.func.value, ast.Name) and c.args:
                table.setdefault(c.func.value.id, []).append(c.args[-1])
        p._tg_stored = table  # type: ignore[attr-defined]
    return table.get(name, [])[:8]


def _loop_target(name: str, at: ast.AST) -> bool:
    n = at
    while (n := parent(n)) is not None:
        if isinstance(n, (ast.For, ast.AsyncFor)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
            return True
    return False
