"""Parameters an optimizer's own construction leaves out on purpose: a filter the user wrote.

``Adam([p for p in model.parameters() if id(p) not in bn_params])`` (frozen BatchNorm while
fine-tuning with tiny batches), ``[p for n, p in net.named_parameters() if "bn" not in n]``,
``list(filter(lambda p: p.ndim > 1, model.parameters()))``: the list is drawn from a module's
parameters (or modules) through a condition, so a parameter of that module the optimizer does not
hold was dropped by the condition, a choice. A condition on ``requires_grad`` is not such a choice
for a parameter frozen then and unfrozen later; it is left to the caller.
"""

from __future__ import annotations

import ast

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.source import SourceFile, last_assigned

# methods of nn.Module whose results a filtered list of parameters is drawn from
_SOURCES = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children",
                      "named_children"})
_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)
_PLAIN = frozenset({"id", "isinstance", "len", "any", "all", "getattr", "hasattr", "type", "str",
                    "set", "tuple", "list"})


def filtered_from(where: tuple[str, int, int]) -> tuple[str, ...] | None:
    """For the optimizer built by the call at ``where``, when its ``params`` are a filtered
    selection of a module's parameters (a comprehension with an ``if`` over ``X.parameters()``,
    ``X.named_parameters()``, ``X.modules()``..., or ``filter(f, X.parameters())``, also through
    a name assigned in the same function and inside ``list(...)``), the attribute chain of ``X``
    (``("self", "model")``, ``("model", "encoder")``); None otherwise, and None for a condition
    that reads ``requires_grad``."""
    tree = parse_file(where[0])
    file = SourceFile.of(tree) if tree is not None else None
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    if call is None:
        return None
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "params"), None)
    if isinstance(arg, ast.Name):
        arg = last_assigned(file.scope(call), arg.id, call.lineno, (*_COMPREHENSIONS, ast.Call))
    if _named_call(arg) in ("list", "tuple") and len(arg.args) == 1:
        arg = arg.args[0]
    if isinstance(arg, _COMPREHENSIONS):
        conditions = [c for g in arg.generators for c in g.ifs]
        source = arg.generators[0].iter
    elif _named_call(arg) == "filter" and len(arg.args) == 2:
        conditions, source = [arg.args[0]], arg.args[1]
    else:
        return None
    if not conditions or any("requires_grad" in ast.dump(c) or _calls_own_function(c)
                             for c in conditions):
        return None
    return _module_chain(source)


def _calls_own_function(condition: ast.AST) -> bool:
    """The condition calls a function by a name other than a builtin (``is_trainable(p)``: what
    it tests is not in sight), or is one (``filter(keep, ...)``)."""
    if isinstance(condition, ast.Name):
        return True
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id not in _PLAIN for n in ast.walk(condition))


def _named_call(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _module_chain(node: ast.AST) -> tuple[str, ...] | None:
    """``model.encoder.parameters()`` -> ``("model", "encoder")``; None for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _SOURCES):
        return None
    chain, cur = [], node.func.value
    while isinstance(cur, ast.Attribute):
        chain.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    return (cur.id, *reversed(chain))


def filtered_out(built: tuple[str, int, int], name: str, model: object) -> bool:
    """The optimizer built at ``built`` was given a filtered selection (:func:`filtered_from`) of
    a module that holds ``model``'s parameter ``name`` (qualified in ``model``): the filter left
    it out. The module the chain names is ``model`` itself when no submodule of it has the
    chain's last name (``self.model``), else a submodule of that name (``model.encoder`` holds
    ``encoder.0.weight``, not ``decoder.0.weight``)."""
    chain = filtered_from(built)
    if chain is None:
        return False
    last = chain[-1]
    under = [m for m, _ in model.named_modules() if m == last or m.endswith("." + last)]
    return not under or any(name.startswith(m + ".") for m in under)
