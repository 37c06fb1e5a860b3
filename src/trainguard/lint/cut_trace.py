"""Following a loss back to the models it reaches, and the cuts on the way.

``trace(script, expr, at, depth)`` answers whether the value ``expr`` (read at ``at``) reaches
a model's output or parameters without a cut, and which cuts it passes: ``.detach()``,
``.data``, ``.item()``, ``float()``/``int()``, a NumPy round trip, a new leaf made from a
value (``torch.tensor(x, requires_grad=True)``; a leaf made learnable with
``.requires_grad_(True)`` is trained itself: no cut of the loss as a whole) and, for a model in
focus, a value computed
under ``torch.no_grad()``. Values are followed through assignments, tuple unpacking, loop
variables, lists filled with ``append``, a helper's parameters (what the file's calls pass)
and what a helper returns; a layer called out of a container by index (``self.net[2](h)``)
reaches the container. A container only forward hooks fill (``activation[name] =
output.detach()``) holds the hooked module's output (:mod:`trainguard.lint.hooks`). Used by
TG205 (a loss or a term cut from the model) and TG206 (a loss term computed from a parameter's
``.data``).
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from trainguard.lint.astutil import (COMPREHENSIONS, dotted, is_true, iterated_literal, kwarg,
                                     parent, walk_local)
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.consts import UNKNOWN, built_at_import, module_constants_trusted, resolve
from trainguard.lint.cuts import CUT_ATTRS, NEW_LEAF, metadata_read, no_grad_block
from trainguard.lint.dataflow import (last_assignment, reaching_values, stored_items,
                                      tuple_assignments)
from trainguard.lint.hooks import container_stores, hooked_parameter, registrations
from trainguard.lint.optimizers import held_leaves_of_all
from trainguard.lint.script import Script
from trainguard.lint.packed import packs_sequences

__all__ = ["Focus", "aliases", "trace", "data_terms"]

_CUT_ATTRS, _NEW_LEAF = CUT_ATTRS, NEW_LEAF
_NUMBER_CASTS = {"float", "int"}  # float(log_prob): a Python number, no graph
_INDEX_OPS = {"torch.argmax", "torch.argmin", "torch.argsort", "torch.bucketize"}


class Focus(NamedTuple):
    """The model a trace looks for, and the other models the same steps update (whose inputs
    are followed: an encoder feeding a critic)."""

    model: str
    others: frozenset[str]
    aliases: frozenset[str]  # other keys bound to it (``self.policy = policy``)
    leaf: bool = False  # a learnable tensor given to the optimizer by name (``Adam([offsets])``)


def aliases(script: Script, model: str) -> frozenset[str]:
    """Keys the file assigns ``model`` to (``self.policy = policy`` for an optimizer built from
    ``policy.parameters()``), and the keys ``model`` was assigned from: by name, file-wide (an
    alias too many only keeps the rule silent)."""
    found = set()
    for key, values in script.assignments.items():
        if any(script.key(v) == model for v in values):
            found.add(key)
    found.update(k for v in script.assignments.get(model, ()) if (k := script.key(v)))
    return frozenset(found - {model})


def trace(script: Script, expr: ast.AST, at: ast.AST, depth: int,  # type: ignore[no-untyped-def]
           focus: "Focus | None" = None):
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
                focus: "Focus | None" = None):
    if depth == 0:
        return focus is None, []
    if isinstance(expr, (ast.Name, ast.Attribute)) and isinstance(expr.ctx, ast.Load) and (
            focus is None or focus.leaf) and script.key(expr) in (
            held_leaves_of_all(script) if focus is None else (focus.model, *focus.aliases)):
        # a learnable tensor an optimizer holds (SAC's log_alpha in the temperature's own loss;
        # the tensor in focus itself): parameters the loss reaches
        return True, []
    if isinstance(expr, ast.Name):
        if not isinstance(expr.ctx, ast.Load):
            return False, []  # a target (``for _ in range(n)``): its value is traced where read
        if expr.id in script.aliases:
            return False, []  # a module (nn, F, torch): not a value on the loss's path
        held = _hook_container(script, expr)
        if held is not None:  # features["mid"], filled by forward hooks only
            uncut, cuts = False, []
            for item in held:
                u, c = trace(script, item, item, depth - 1, focus)
                uncut, cuts = uncut or u, cuts + c
            return (True, []) if uncut else (False, cuts)
        values = reaching_values(expr.id, at)
        if len(values) > 1:  # a conditional rebinding (``if frozen: x = x.detach()``)
            uncut, cuts = False, []
            for v in values:
                u, c = _trace_value(script, expr.id, v, depth, focus)
                uncut, cuts = uncut or u, cuts + c
            return (True, []) if uncut else (False, cuts)
        value = values[0] if values else None
        if value is None:
            value = _comprehension_bound(expr) or _unpacked_or_iterated(script, expr.id, at)
            if value is not None and _loop_target(expr.id, at) and _opaque(script, value):
                return False, []  # a batch of a loader handed in: no parameters
        hooked = hooked_parameter(script, expr) if value is None else None
        if hooked is not None:  # a forward hook's output: the hooked module's
            while isinstance(hooked, ast.Subscript) or \
                    isinstance(hooked, ast.Attribute) and script.key(hooked) is None:
                hooked = hooked.value  # backbone[3]: a layer of backbone
            key = script.key(hooked) or ""
            return focus is None or any(key == m or key.startswith(m + ".") for m in (
                focus.model, *focus.aliases)), []
        if value is None:
            args = _arguments_for(script, expr.id, at)
            if args:  # a helper's parameter: what its callers in this file pass
                uncut, cuts = False, []
                for a in args:
                    if not isinstance(a, ast.Constant) and resolve(script, a) is not UNKNOWN:
                        continue  # a configuration the file fixes (``self.hp``): no graph
                    u, c = trace(script, a, a, depth - 1, focus)
                    uncut, cuts = uncut or u, cuts + c
                return uncut, cuts
            if module_constants_trusted(script.tree, script.source) and \
                    built_at_import(expr, script.aliases):
                return False, []  # a tensor built at import from literals: no graph
            # a function parameter or a global might carry a graph: assumed connected, unless
            # a number by its default or annotation (``gamma=0.99``, ``gamma: float``)
            return focus is None and not _loop_target(expr.id, at) and \
                not _number_parameter(expr.id, at), []
        return _trace_value(script, expr.id, value, depth, focus)
    if isinstance(expr, ast.Call):
        q = script.call_qualname(expr) or ""
        if q == "torch.as_tensor" and expr.args and not isinstance(
                expr.args[0], (ast.List, ast.Tuple, *COMPREHENSIONS)):
            # as_tensor(t) returns t itself (or t.to(dtype), with its history) for a tensor; a
            # NumPy array or a list of numbers shows its own cut on the way
            return trace(script, expr.args[0], at, depth - 1, focus)
        if q in _NEW_LEAF and expr.args:
            inner_uncut, inner_cuts = trace(script, expr.args[0], at, depth - 1, focus)
            if not (inner_uncut or inner_cuts) and is_true(kwarg(expr, "requires_grad")) and \
                    not any(isinstance(n, ast.Name) and n.id not in script.aliases
                            for n in ast.walk(expr.args[0])):
                # torch.tensor(np.log(0.1), requires_grad=True): a learnable leaf made from
                # constants (SAC's log_alpha), not a value cut from a graph
                return focus is None, []
            if inner_uncut or inner_cuts or is_true(kwarg(expr, "requires_grad")):
                return False, [(expr, f"a new tensor made by {q.rsplit('.', 1)[-1]}(...)")] + \
                    inner_cuts
            return False, []
        if isinstance(expr.func, ast.Name) and expr.func.id in _NUMBER_CASTS and \
                len(expr.args) == 1 and expr.func.id not in script.functions:
            uncut, cuts = trace(script, expr.args[0], at, depth - 1, focus)
            if uncut or cuts:
                return False, [(expr, f"{expr.func.id}(), a Python number")] + cuts
            return False, []
        if focus is None and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr == "requires_grad_" and (not expr.args or is_true(expr.args[0])):
            # enc(x).detach().clone().requires_grad_(True): a new learnable leaf (a latent code
            # optimized directly), not a loss cut from every graph; for a model in focus (one
            # an optimizer holds) the detach on the way is still its cut
            return True, []
        if q in _INDEX_OPS and expr.args:  # torch.argmax(logits, dim=1): integer indices
            uncut, cuts = trace(script, expr.args[0], at, depth - 1, focus)
            if uncut:
                return False, [(expr, f"{q}(), integer indices")] + cuts
            return False, cuts
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _CUT_ATTRS:
            uncut, cuts = trace(script, expr.func.value, at, depth - 1, focus)
            if uncut:
                return False, [(expr, f".{expr.func.attr}()")] + cuts
            return False, cuts  # (cut before: ``w.data.detach()`` is cut at ``.data``)
        k = script.key(expr.func) or _container_model(script, expr.func)
        if k == "self" and script.graph.in_module_class(expr) or \
                k and k != "self" and script.is_model(k):
            if focus is None or k == focus.model or k in focus.aliases or \
                    focus.model == "self" and k.startswith("self."):
                return True, []  # (a module's own method: self(x), self.decoder(h))
            if k not in focus.others:
                return False, []
            # another stepped model: the one in focus may feed it (an encoder's features)
            uncut, cuts = False, []
            for a in [*expr.args, *(kw.value for kw in expr.keywords)]:
                u, c = trace(script, a, at, depth - 1, focus)
                uncut, cuts = uncut or u, cuts + c
            return uncut, cuts
        models = _iterated_models(script, expr.func.id, expr) \
            if isinstance(expr.func, ast.Name) else []
        if models:  # ``d(real) for d in (disc_a, disc_b)``: each model of the literal in turn
            return focus is None or focus.model in models, []
        called = script.targets(expr)
        if called:
            # a helper (``gan_loss(D, fake, True)``): what it returns, with its parameters
            # taken as connected (the caller's arguments are traced on their own)
            target = called[0]
            if target.script is not script:
                return focus is None, []
            rets = [n for n in ast.walk(target.func) if isinstance(n, ast.Return)
                    and n.value is not None]
            inner = _receiver_focus(script, expr, target, focus)
            any_uncut, all_cuts = not rets, []
            for r in rets:
                uncut, cuts = trace(script, r.value, r, depth - 1, inner)
                any_uncut |= uncut
                all_cuts.extend(cuts)
            return any_uncut, all_cuts
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("parameters",
                                                                       "named_parameters"):
            return focus is None or script.key(expr.func.value) in (focus.model,
                                                                     *focus.aliases), []
    if isinstance(expr, ast.Attribute) and expr.attr in ("weight", "bias"):
        owner = script.key(expr.value) or ""
        root = owner.split(".", 1)[0]
        if owner and (script.is_model(owner) or script.is_model(root)) and root != "self":
            # a parameter of a model (``model.grn.weight``): it reaches that model
            return focus is None or focus.model in (owner, root), []
    if focus is not None and metadata_read(expr):
        return False, []  # x.to(self.weight.dtype): a property of the tensor, not its values
    if isinstance(expr, ast.Compare):  # (xs >= x1) & (xs <= x2): booleans, no grad_fn
        uncut, cuts = False, []
        for operand in [expr.left, *expr.comparators]:
            u, c = trace(script, operand, at, depth - 1, focus)
            uncut, cuts = uncut or u, cuts + c
        if uncut:
            return False, [(expr, "a comparison, boolean values")] + cuts
        return False, cuts
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        uncut, cuts = trace(script, expr.value, at, depth - 1, focus)
        if _packed(script, expr.value, at):
            return uncut, cuts  # PackedSequence.data: the packed values, with their history
        if uncut or cuts:
            return False, [(expr, ".data")] + cuts
        return False, []
    any_uncut, all_cuts = False, []
    children = list(ast.iter_child_nodes(expr))
    if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        children = [expr.elt]  # (the iterable reaches the value through the loop's target)
    elif isinstance(expr, ast.DictComp):
        children = [expr.key, expr.value]
    if isinstance(expr, ast.Call):
        children = [c for c in children if c is not expr.func] + (
            [expr.func.value] if isinstance(expr.func, ast.Attribute) else [])
    for child in children:
        if isinstance(child, (ast.expr_context, ast.keyword)):
            child = child.value if isinstance(child, ast.keyword) else None  # type: ignore
            if child is None:
                continue
        uncut, cuts = trace(script, child, at, depth, focus)
        any_uncut |= uncut
        all_cuts.extend(cuts)
    return any_uncut, all_cuts


def _receiver_focus(script: Script, call: ast.Call, target,  # type: ignore[no-untyped-def]
                    focus: "Focus | None") -> "Focus | None":
    """The focus to follow a method's returns with: for a method of a module class of the file
    called on the model in focus (``bank.exemplars()``), ``self`` inside it is that model, and
    what it reaches through ``self`` (``self.mnemonics``, its own parameter) reaches the model
    in focus; otherwise ``focus`` itself."""
    if focus is None or focus.model == "self" or not target.bound or \
            not isinstance(call.func, ast.Attribute) or \
            script.key(call.func.value) not in (focus.model, *focus.aliases) or \
            not script.graph.in_module_class(target.func):
        return focus
    return Focus("self", frozenset(), frozenset(), leaf=True)


def _trace_value(script: Script, name: str, value: ast.expr, depth: int,  # type: ignore
                 focus: "Focus | None"):
    """What a name's assigned ``value`` reaches (with the items later stored into it)."""
    uncut, cuts = trace(script, value, value, depth - 1, focus)
    block = no_grad_block(script, value) if focus is not None else None
    if block is not None:
        if uncut or cuts:  # computed without a graph: a cut for the model it came from
            return False, [(value, f"a value computed under {ast.unparse(block)} "
                                   f"({script.at(block.lineno)})")] + cuts
        return False, []
    for item in stored_items(name, value):
        u, c = trace(script, item, item, depth - 1, focus)
        uncut, cuts = uncut or u, cuts + c
    return uncut, cuts


def _hook_container(script: Script, name: ast.Name) -> list[ast.expr] | None:
    """What forward hooks store into the container ``name`` reads (``features = {}`` at module
    level or in a function around the read, filled by ``features[key] = output.detach()`` in a
    hook): each stored value, read as the hooked module's output (:mod:`trainguard.lint.hooks`).
    None when ``name`` is no such container."""
    if not registrations(script):
        return None
    scope: ast.AST | None = name
    while (scope := parent(scope)) is not None:
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and any(
                isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Store)
                for n in walk_local(scope)):
            break
    return container_stores(script, name.id, scope if scope is not None else script.tree)


def _unpacked_or_iterated(script: Script, name: str, at: ast.AST) -> ast.expr | None:
    """Where ``name`` gets its value when no plain assignment gives it: the whole value of a
    tuple assignment (``log_probs, rewards = run_episode(policy)``), or the iterable of the
    ``for`` loop (or comprehension) that binds it (``for lp, g in zip(log_probs, returns)``).
    Tracing the whole value over-approximates: any uncut path in it keeps the loss connected."""
    n, top = at, at
    while (n := parent(n)) is not None:
        top = n
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
            return _iterated(name, n.target, n.iter)
        if isinstance(n, COMPREHENSIONS):
            for g in n.generators:
                if any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(g.target)):
                    return _iterated(name, g.target, g.iter)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
    scope = n if n is not None else top  # a function, or the module of a flat script
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
        return None
    line = at.lineno  # type: ignore[attr-defined]
    best: tuple[int, ast.expr] | None = None
    for lineno, t, value in tuple_assignments(scope).get(name, ()):
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


def _comprehension_bound(name: ast.Name) -> ast.expr | None:
    """The iterable of the comprehension around ``name`` that binds it (``c`` in
    ``[c.detach() for c in comps]``), found from the name itself: the point a value is read at
    may be the comprehension, outside its scope."""
    n: ast.AST | None = name
    while (n := parent(n)) is not None and not isinstance(n, ast.stmt):
        if isinstance(n, COMPREHENSIONS):
            for g in n.generators:
                if any(isinstance(t, ast.Name) and t.id == name.id for t in ast.walk(g.target)):
                    return _iterated(name.id, g.target, g.iter)
    return None


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


def _iterated_models(script: Script, name: str, at: ast.AST) -> list[str]:
    """The model keys a loop or comprehension variable ``name`` runs over, when it iterates a
    literal tuple or list of models (``for d in (disc_a, disc_b)``); empty otherwise."""
    keys = [script.key(e) for e in iterated_literal(at, name) or ()]
    return [k for k in keys if k] if keys and all(k and script.is_model(k) for k in keys) \
        else []


def _container_model(script: Script, func: ast.AST) -> str | None:
    """The model key of the container a called layer is taken from by index (``self.net[2](h)``
    on an ``nn.Sequential``, ``self.blocks[i](h)`` on an ``nn.ModuleList``): calling it runs
    that model's parameters, so the call reaches the model."""
    while isinstance(func, ast.Subscript):
        func = func.value
    k = script.key(func)
    return k if k is not None and k != "self" and script.is_model(k) else None


def _loop_target(name: str, at: ast.AST) -> bool:
    n = at
    while (n := parent(n)) is not None:
        if isinstance(n, (ast.For, ast.AsyncFor)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
            return True
    return False


def data_terms(script: Script, call: ast.Call) -> list[tuple[ast.AST, ast.AST, ast.AST]]:
    """``(term, .data read, where the term is read)`` for each summed term of the loss that
    backward ``call`` runs on (:mod:`trainguard.lint.terms`) that reaches a model only through
    ``.data`` (an L1 penalty on ``layer.weight.data``) while another term reaches one uncut:
    such a term adds to the loss's value and nothing to its gradient."""
    from trainguard.lint.terms import summed_terms

    target = call.func.value if isinstance(call.func, ast.Attribute) else None
    if target is None:
        return []
    terms = summed_terms(script, target, call)
    if len(terms) < 2:
        return []
    found, connected = [], False
    for term, where in terms:
        uncut, cuts = trace(script, term, where, depth=12)
        connected = connected or uncut
        if cuts and not uncut and all(how == ".data" for _, how in cuts):
            found.append((term, cuts[0][0], where))
    return found if connected else []


def _packed(script: Script, expr: ast.AST, at: ast.AST) -> bool:
    """``expr`` is a ``PackedSequence``: a ``pack_padded_sequence``/``pack_sequence`` call, or a
    name last assigned one (its ``.data`` is a field, not ``Tensor.data``)."""
    if isinstance(expr, ast.Name):
        value = last_assignment(expr.id, at)
        expr = value if value is not None else expr
    if not isinstance(expr, ast.Call):
        return False
    if (script.call_qualname(expr) or "").startswith("torch.nn.utils.rnn.pack"):
        return True
    # a model whose forward returns a PackedSequence: ``out._replace(data=self.fc(out.data))``
    # on a recurrent layer's packed output, in a file that packs sequences
    return packs_sequences(script) and any(
        _returns_packed(t.func) for t in script.graph.instance_targets(expr)
        if getattr(t.func, "name", "") == "forward")


def _returns_packed(func: ast.AST) -> bool:
    """Every ``return`` of ``func`` gives ``x._replace(...)`` (a PackedSequence with a field
    replaced: the namedtuple's own method)."""
    rets = [r for r in walk_local(func) if isinstance(r, ast.Return) and r.value is not None]
    return bool(rets) and all(isinstance(r.value, ast.Call) and
                              isinstance(r.value.func, ast.Attribute) and
                              r.value.func.attr == "_replace" for r in rets)
