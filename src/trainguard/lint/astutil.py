"""Small helpers over ``ast``: dotted names with import aliases resolved, parents, local walks.

Nothing here imports torch: the linter reads scripts, it never runs them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

__all__ = ["dotted", "parent", "walk_local", "kwarg", "is_true", "is_false", "const_value",
           "mode_switch", "names_in", "if_branches", "exclusive", "encloses", "assigned_pairs", "self_attr",
           "is_main_guard", "SCOPES"]

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def dotted(node: ast.AST | None) -> str | None:
    """``self.model.module`` for an attribute chain of names, else None (calls and subscripts
    in the chain are kept as ``()`` and ``[]`` so that ``model(x).detach`` is ``model().detach``)."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return ".".join(reversed(parts))
        elif isinstance(node, ast.Call):
            parts.append("()")
            node = node.func
        elif isinstance(node, ast.Subscript):
            parts.append("[]")
            node = node.value
        else:
            return None


def parent(node: ast.AST) -> ast.AST | None:
    return getattr(node, "_tg_parent", None)


def statement_of(node: ast.AST) -> ast.AST | None:
    """The statement that holds ``node`` (``node`` itself when it is one), or None."""
    n: ast.AST | None = node
    while n is not None and not isinstance(n, ast.stmt):
        n = parent(n)
    return n


def encloses(outer: ast.AST, node: ast.AST) -> bool:
    """``node`` lies inside ``outer`` (by the parent links; not ``outer`` itself)."""
    n = node
    while (n := parent(n)) is not None:
        if n is outer:
            return True
    return False


def if_branches(node: ast.AST) -> dict[int, str]:
    """``id(if) -> "body"``, ``"orelse"`` or ``"test"`` for each ``if`` around ``node``."""
    out = {}
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, ast.If):
            out[id(p)] = "body" if n in p.body else "orelse" if n in p.orelse else "test"
        n = p
    return out


def ifs_between(node: ast.AST, top: ast.AST) -> list[ast.If]:
    """The ``if`` statements around ``node`` below ``top``, innermost first (``node`` in their
    body or ``else``, not their test): ``node`` runs only when they let it."""
    out, n = [], node
    while (p := parent(n)) is not None and p is not top:
        if isinstance(p, ast.If) and n is not p.test:
            out.append(p)
        n = p
    return out


def exclusive(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` sit in opposite branches of one ``if``."""
    ba, bb = if_branches(a), if_branches(b)
    return any(k in bb and ba[k] != bb[k] for k in ba)


def set_parents(tree: ast.AST) -> list[ast.AST]:
    """Link every node to its parent (``node._tg_parent``); returns all nodes in walk order."""
    nodes = [tree]
    i = 0
    while i < len(nodes):
        node = nodes[i]
        i += 1
        children = list(ast.iter_child_nodes(node))
        node._tg_children = children  # type: ignore[attr-defined]
        for child in children:
            child._tg_parent = node  # type: ignore[attr-defined]
        nodes.extend(children)
    return nodes


def children(node: ast.AST) -> list[ast.AST]:
    """The child nodes (cached by :func:`set_parents`)."""
    kids = getattr(node, "_tg_children", None)
    return kids if kids is not None else list(ast.iter_child_nodes(node))


def walk_local(node: ast.AST, *, into_defs: bool = False) -> Iterator[ast.AST]:
    """Like ``ast.walk`` but does not enter nested function, lambda or class bodies."""
    stack = list(children(node))
    while stack:
        child = stack.pop()
        yield child
        if into_defs or not isinstance(child, SCOPES):
            stack.extend(children(child))


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def const_value(node: ast.AST | None) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and isinstance(node.operand, ast.Constant):
        return -node.operand.value  # type: ignore[operator]
    return ...


def is_true(node: ast.AST | None) -> bool:
    return const_value(node) is True


def is_false(node: ast.AST | None) -> bool:
    return const_value(node) is False


def mode_switch(call: ast.Call) -> str | None:
    """The mode a call written as ``X.train(...)``/``X.eval()`` sets when it is
    ``nn.Module.train(mode=True)``/``eval()``: ``"train"``, ``"eval"`` (``eval()``,
    ``train(False)``, ``train(mode=False)``), ``"?"`` (``train(flag)`` with a flag not constant),
    or None for another call (other arguments: a trainer's own ``train(epochs=3)``; any other
    attribute). ``eval()`` is ``train(False)`` (torch.nn.Module.eval's documentation)."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in ("train", "eval"):
        return None
    if f.attr == "eval":
        return "eval" if not call.args and not call.keywords else None
    if len(call.args) + len(call.keywords) > 1 or any(k.arg != "mode" for k in call.keywords):
        return None
    flag = call.args[0] if call.args else kwarg(call, "mode")
    if flag is None or is_true(flag):
        return "train"
    return "eval" if is_false(flag) else "?"


def is_main_guard(node: ast.AST) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If):
        return False
    t = node.test
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return False
    sides = (t.left, t.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" and const_value(b) == "__main__"
               for a, b in (sides, sides[::-1]))


def names_in(node: ast.AST) -> set[str]:
    """Every identifier, attribute name and string constant under ``node`` (lower case)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id.lower())
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr.lower())
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out.add(sub.value.lower())
        elif isinstance(sub, ast.arg):
            out.add(sub.arg.lower())
    return out


def assigned_pairs(targets: list[ast.expr], value: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs of an assignment, element-wise for ``self.a, self.b = a, b``."""
    out = []
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(t.elts) == len(value.elts):
            out.extend(zip(t.elts, value.elts))
        else:
            out.append((t, value))
    return out


def self_attr(node: ast.AST) -> str | None:
    """``x`` for ``self.x`` (not ``self.x.y`` nor ``self``), else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "self":
        return node.attr
    return None


def iterated_literal(node: ast.AST, name: str) -> list[ast.expr] | None:
    """The elements of the literal tuple or list that the nearest loop or comprehension around
    ``node`` binding ``name`` runs over (``for d in (disc_a, disc_b)``); None when none binds it
    there or it runs over something else."""
    n = node
    while (n := parent(n)) is not None and not isinstance(n, SCOPES):
        gens = n.generators if isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.SetComp,
                                              ast.DictComp)) else \
            [n] if isinstance(n, (ast.For, ast.AsyncFor)) else []
        for g in gens:
            if isinstance(g.target, ast.Name) and g.target.id == name:
                return list(g.iter.elts) if isinstance(g.iter, (ast.Tuple, ast.List)) else None
    return None


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def iterated_parts(target: ast.expr, it: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
    """What each part of a loop target takes its values from: ``t, c in zip(totals, terms)``
    pairs ``t`` with ``totals``; ``k, v in d.items()`` and ``v in d.values()`` pair ``v`` with
    ``d``; ``i, x in enumerate(xs)`` pairs ``x`` with ``xs``."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords and \
            isinstance(target, ast.Tuple):
        if it.func.id == "zip" and len(target.elts) == len(it.args):
            return [p for t, a in zip(target.elts, it.args) for p in iterated_parts(t, a)]
        if it.func.id == "enumerate" and len(target.elts) == 2 and it.args:
            return iterated_parts(target.elts[1], it.args[0])
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
        if it.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            return [(target.elts[1], it.func.value)]
        if it.func.attr == "values":
            return [(target, it.func.value)]
    return [(target, it)]


def comprehension_holds(comp: ast.AST, held: set[str],
                        flows: Callable[[ast.AST, set[str]], bool]) -> bool:
    """What comprehension ``comp`` builds holds a value of the names ``held``, where
    ``flows(node, names)`` says whether expression ``node`` holds one of ``names``: a name its
    generators bind holds it when the part of the iterable it takes its values from does
    (``{k: v for k, v in out.items()}`` holds ``out``'s values, ``{k: v.detach() for k, v in
    out.items()}`` and the keys do not), and only what it builds counts (iterating over ``out``
    keeps nothing)."""
    held = set(held)
    for gen in comp.generators:  # type: ignore[attr-defined]
        bound = {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
        taken = {n.id for t, it in iterated_parts(gen.target, gen.iter) if flows(it, held)
                 for n in ast.walk(t) if isinstance(n, ast.Name)}
        held = (held - bound) | taken
    built = [comp.key, comp.value] if isinstance(comp, ast.DictComp) else \
        [comp.elt]  # type: ignore[attr-defined]
    return any(flows(b, held) for b in built)
