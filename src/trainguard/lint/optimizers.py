"""Which modules an optimizer holds the parameters of, and which zeroings clear its gradients.

``torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()))`` holds ``enc`` and ``dec``;
``enc.zero_grad()`` clears only ``enc``'s gradients, so ``dec``'s keep adding up over every step
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.zero_grad).
Answers are in the file's keys (``self.encoder``, ``netS``); an optimizer built from anything
the file cannot read (a list built elsewhere, a helper) holds unknown modules, and every
zeroing is then taken to clear it.
"""

from __future__ import annotations

import ast

from trainguard.lint.script import Script

__all__ = ["held_modules", "held_leaves", "held_leaves_of_all", "cleared", "zero_covers"]

_PARAM_CALLS = ("parameters", "named_parameters")
# tensor factories whose result, with requires_grad=True, is a new learnable leaf
_FACTORIES = {f"torch.{n}" for n in (
    "zeros", "ones", "randn", "rand", "empty", "full", "eye", "arange", "linspace",
    "zeros_like", "ones_like", "randn_like", "rand_like", "empty_like", "full_like")}
_PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")


def held_modules(script: Script, key: str | None, at: ast.AST | None = None
                 ) -> frozenset[str] | None:
    """The keys of the modules whose parameters optimizer ``key`` holds, or None if unknown.
    With ``at`` (a use of a plain local name), only the optimizers that name is bound to in the
    function holding ``at``, when it binds it there (``opt`` in ``pretrain()`` and in
    ``restore()`` are two optimizers), and of those the ones that reach ``at`` in flow order
    (a name rebound for a second model's optimizer)."""
    if not key:
        return None
    scope = script.enclosing_function(at) if at is not None and "." not in key else None
    reach = _reaching(script, key, at) if at is not None and "." not in key else None
    memo = script.__dict__.setdefault("_tg_held", {})
    mkey = (key, id(scope), tuple(map(id, reach or ())))
    if mkey not in memo:
        memo[mkey] = _held(script, key, scope, reach)
    return memo[mkey]


def _reaching(script: Script, key: str, at: ast.AST) -> list[ast.expr] | None:
    """The bindings of the plain name ``key`` that reach ``at`` in flow order (``opt`` bound to
    a teacher's optimizer, trained with, then rebound to a student's above the student's
    ``opt.step()``); None when a later binding in a loop around ``at`` may reach it on the
    next pass, or when none is found above it."""
    from trainguard.lint.dataflow import reaching_values

    bound = script.assignments.get(key, [])
    line = at.lineno  # type: ignore[attr-defined]
    loops = [id(x) for x in script.enclosing_loops(at)]
    if any(v.lineno > line and any(id(x) in loops for x in script.enclosing_loops(v))
           for v in bound):
        return None
    reach = reaching_values(key, at)
    return reach if reach and all(any(r is v for v in bound) for r in reach) else None


def _held(script: Script, key: str, scope: ast.AST | None,
          reach: list[ast.expr] | None = None) -> frozenset[str] | None:
    found: set[str] = set()
    values = script.assignments.get(key, [])
    if scope is not None:
        local = [v for v in values if script.enclosing_function(v) is scope]
        values = local or values
    if reach:
        values = reach  # the bindings that reach the use, in flow order
    if not values:
        return None
    for value in values:
        if not isinstance(value, ast.Call):
            return None
        params = value.args[0] if value.args else next(
            (k.value for k in value.keywords if k.arg == "params"), None)
        if params is None:
            return None
        keys = _modules_in(script, params, depth=2)
        if keys is None:
            return None
        found |= keys
    return frozenset(found) or None


def _learnable_leaf(script: Script, expr: ast.AST) -> bool:
    """``nn.Parameter(...)``, a tensor factory called with ``requires_grad=True``
    (``torch.zeros(1, requires_grad=True)``), or ``t.requires_grad_()``: a new leaf that
    records gradients (https://pytorch.org/docs/stable/notes/autograd.html, "Setting
    requires_grad"); one that an optimizer is given is learned."""
    if not isinstance(expr, ast.Call):
        return False
    q = script.call_qualname(expr) or ""
    if q in _PARAMETER:
        return True
    if isinstance(expr.func, ast.Attribute) and expr.func.attr == "requires_grad_":
        return not expr.args or isinstance(expr.args[0], ast.Constant) and \
            expr.args[0].value is True
    return q in _FACTORIES and any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                                   and k.value.value is True for k in expr.keywords)


def held_leaves(script: Script, key: str | None) -> frozenset[str]:
    """Keys of the learnable tensors (:func:`learnable_leaf`) that optimizer ``key`` is given by
    name in a list or tuple (``Adam([log_alpha])``, a param group's ``"params"`` list): names
    the file binds to such a leaf and to nothing else."""
    out: set[str] = set()
    for value in script.assignments.get(key or "", []):
        if not isinstance(value, ast.Call):
            continue
        params = value.args[0] if value.args else next(
            (k.value for k in value.keywords if k.arg == "params"), None)
        for item in _listed(params):
            k = script.key(item)
            values = script.assignments.get(k or "", [])
            if k and values and all(_learnable_leaf(script, v) for v in values):
                out.add(k)
    return frozenset(out)


def held_leaves_of_all(script: Script) -> frozenset[str]:
    """:func:`held_leaves` of every optimizer the file builds (memoised per file)."""
    memo = script.__dict__
    if "_tg_leaves" not in memo:
        memo["_tg_leaves"] = frozenset().union(*(
            held_leaves(script, k) for k in list(script.assignments) if script.is_optimizer(k)))
    return memo["_tg_leaves"]


def _listed(params: ast.AST | None) -> list[ast.AST]:
    """The named items of a parameter list literal, param groups' ``"params"`` lists included,
    and of the lists added to a model's (``list(model.parameters()) + [log_var]``)."""
    if isinstance(params, ast.BinOp) and isinstance(params.op, ast.Add):
        return _listed(params.left) + _listed(params.right)
    if not isinstance(params, (ast.List, ast.Tuple)):
        return []
    out: list[ast.AST] = []
    for e in params.elts:
        if isinstance(e, ast.Dict):
            for k, v in zip(e.keys, e.values):
                if isinstance(k, ast.Constant) and k.value == "params":
                    out.extend(_listed(v) if isinstance(v, (ast.List, ast.Tuple)) else [v])
        elif isinstance(e, (ast.Name, ast.Attribute)):
            out.append(e)
    return out


def _modules_in(script: Script, expr: ast.AST, depth: int) -> set[str] | None:
    """Keys of ``X`` in every ``X.parameters()`` under ``expr``; None when some part of the
    parameter list is a value the file does not show (a name bound elsewhere)."""
    out: set[str] = set()
    for sub in ast.walk(expr):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr in _PARAM_CALLS:
            k = script.key(sub.func.value)
            if k is None:
                return None
            out.add(_stored_as(script, sub.func.value) or k)
    if out:
        return out
    if isinstance(expr, ast.Name) and depth > 0:
        values = script.assignments.get(expr.id, [])
        if len(values) == 1:
            return _modules_in(script, values[0], depth - 1)
    return None


def _stored_as(script: Script, name: ast.AST) -> str | None:
    """``self.discriminator`` for the argument ``discriminator`` of a method that stores it so
    (``self.discriminator = discriminator``): the key the rest of the class uses for it."""
    if not isinstance(name, ast.Name):
        return None
    func = script.enclosing_function(name)
    if func is None or name.id not in {a.arg for a in func.args.args + func.args.kwonlyargs}:
        return None
    stored = {script.key(stmt.targets[0]) for stmt in ast.walk(func)
              if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.value, ast.Name) and stmt.value.id == name.id
              and isinstance(stmt.targets[0], ast.Attribute)}
    return stored.pop() if len(stored) == 1 else None


def cleared(script: Script, zero_key: str | None, step_key: str | None) -> frozenset[str] | None:
    """Which of the modules optimizer ``step_key`` holds a zeroing on ``zero_key`` (a model, an
    optimizer, ``*`` for ``p.grad = None``) clears: None for all of them. Unknown means all:
    only a zeroing shown to miss some held module clears less (a part of the held modules, a
    sub-module of one, or a model that another optimizer holds)."""
    held = held_modules(script, step_key)
    if held is None or zero_key in (None, "*") or zero_key == step_key:
        return None
    if zero_key in held:
        return frozenset({zero_key})
    if any(zero_key.startswith(h + ".") for h in held):
        return frozenset()  # a sub-module of a held module: the rest keeps its gradients
    if any(h.startswith(zero_key + ".") for h in held):
        return None  # the whole model around the held sub-modules
    if script.is_optimizer(zero_key):
        other = held_modules(script, zero_key)
        return None if other is None else held & other
    for k in script.optimizers:
        if k != step_key and zero_key in (held_modules(script, k) or ()):
            return frozenset()  # another optimizer's model (a GAN's critic)
    return None


def zero_covers(script: Script, zero_keys: list[str | None], step_key: str | None) -> bool:
    """Whether the zeroings on ``zero_keys`` together clear every gradient that optimizer
    ``step_key`` applies."""
    held = held_modules(script, step_key)
    done: set[str] = set()
    for z in zero_keys:
        c = cleared(script, z, step_key)
        if c is None:
            return True
        done |= c
    return held is not None and held <= done
