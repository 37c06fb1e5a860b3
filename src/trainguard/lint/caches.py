"""Tensors a module caches on ``self`` from its own learnable parameters: a rotary or sine
frequency table, a positional table, a normalised weight, computed with grad enabled in one
call and returned by later calls. The cached tensor holds the graph of the call that built it;
the first backward frees that graph, and the next backward through the cached tensor fails
with "Trying to backward through the graph a second time"
(https://github.com/lucidrains/rotary-embedding-torch/issues/18,
https://github.com/lab-cosmo/torch-pme/issues/62).

A cache is a store ``self.C = value`` (``self.C[key] = value``,
``self.register_buffer("C", value)``) in a method other than ``__init__`` whose value, through
the method's local names, reads a learnable parameter of the module (``nn.Parameter`` not built
with ``requires_grad=False``) or calls a submodule with parameters, with no cut on the way
(``.detach()``, ``.item()``), outside ``no_grad``; and a later call can reuse it: ``forward`` or
a method it calls reads ``self.C`` before the store, in another method, or after a store that
only runs on a condition (``if self.C is None:``). Silent when the store or its reuse depends on grad or training state
(``requires_grad``, ``torch.is_grad_enabled()``, ``self.training``, or the flag the parameter's
``requires_grad`` was given), when another method resets the cache, when the file calls the
storing method (one outside the forward path) inside a loop, rebuilding the cache every step
(``model.process_support_set(...)`` before each episode), and for state carried from
call to call (``self.h = self.rnn(x, self.h)``: TG201). A method under ``functools.lru_cache``
that returns such a value is a cache too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, parent, walk_local
from trainguard.lint.cuts import CUT_ATTRS
from trainguard.lint.cuts import parametric
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.script import Script

__all__ = ["CachedGraph", "cached_graphs"]

_GRAD_WORDS = {"requires_grad", "is_grad_enabled", "training", "grad_enabled",
               "is_inference_mode_enabled"}
_NONE_TESTS = {"exists", "isinstance", "hasattr", "len", "bool", "callable"}


@dataclass(frozen=True, slots=True)
class CachedGraph:
    cls: ast.ClassDef
    cache: str  # what holds it: "self.table", "the lru_cache of table()"
    store: ast.AST  # the store, or the cached method
    source: str  # the parameter or submodule it is computed from


def cached_graphs(script: Script) -> list[CachedGraph]:
    out = []
    for cls in script.classes.values():
        methods = [b for b in cls.body if isinstance(b, ast.FunctionDef)]
        init = next((m for m in methods if m.name == "__init__"), None)
        if init is None:
            continue
        learnable, flags = _learnable(script, cls, init)
        if not learnable:
            continue
        for m in methods:
            if m is init:
                continue
            memo = _memoized(script, m, learnable)
            if memo is not None:
                out.append(CachedGraph(cls, f"the {memo[0]} of {m.name}()", m, memo[1]))
            for stmt in walk_local(m):
                found = _cache_store(script, cls, m, stmt, learnable, flags)
                if found is not None:
                    out.append(found)
    return out


def _learnable(script: Script, cls: ast.ClassDef, init: ast.FunctionDef
               ) -> tuple[set[str], set[str]]:
    """The attributes holding parameters or parametric submodules, and the words naming the
    flags that decide whether a parameter learns (``requires_grad=learned_freq``)."""
    attrs, flags = set(), set()
    for stmt in walk_local(init):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        t = dotted(stmt.targets[0]) or ""
        if not t.startswith("self.") or t.count(".") != 1:
            continue
        v = stmt.value
        if isinstance(v, ast.Call) and (script.call_qualname(v) or "").endswith("Parameter"):
            rg = next((k.value for k in v.keywords if k.arg == "requires_grad"), None)
            if rg is None and len(v.args) > 1:
                rg = v.args[1]
            if isinstance(rg, ast.Constant) and rg.value is False:
                continue
            if rg is not None and not _learns(script, cls, init, rg):
                continue
            if rg is not None:
                flags |= {n.id for n in ast.walk(rg) if isinstance(n, ast.Name)}
            attrs.add(t[5:])
        elif parametric(script, v, 4):
            attrs.add(t[5:])
    for stmt in walk_local(init):  # self.learned_freq = learned_freq
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and \
                stmt.value.id in flags:
            flags |= {t.attr for t in stmt.targets if isinstance(t, ast.Attribute)}
    return attrs, flags


def _learns(script: Script, cls: ast.ClassDef, init: ast.FunctionDef, flag: ast.AST) -> bool:
    """Whether a ``requires_grad=`` given by an ``__init__`` parameter can be true: some call
    that builds the class passes something other than ``False`` (or omits it, the default not
    being ``False``)."""
    if not isinstance(flag, ast.Name):
        return True
    names = [a.arg for a in init.args.args][1:]
    if flag.id not in names:
        return True
    idx = names.index(flag.id)
    defaults = init.args.defaults
    default = defaults[idx - (len(names) - len(defaults))] \
        if idx >= len(names) - len(defaults) else None
    sites = [c for c in script.calls if dotted(c.func) == cls.name]
    for call in sites:
        given = call.args[idx] if idx < len(call.args) and \
            not any(isinstance(a, ast.Starred) for a in call.args[:idx + 1]) else \
            next((k.value for k in call.keywords if k.arg == flag.id), default)
        if not (isinstance(given, ast.Constant) and given.value in (False, 0)):
            return True
    return False


def _cache_store(script: Script, cls: ast.ClassDef, method: ast.FunctionDef, stmt: ast.AST,
                 learnable: set[str], flags: set[str]) -> CachedGraph | None:
    stored = _stored(stmt)
    if stored is None or script.grad_disabled(stmt):
        return None
    attr, value = stored
    refs = _self_refs(script, value, stmt, 6)
    if refs is None or attr in refs:
        return None  # cut, or state carried from call to call
    source = next((r for r in sorted(refs) if r in learnable), None)
    if source is None:
        return None
    path = _forward_path(cls)
    reads = [n for m in path for n in ast.walk(m) if isinstance(n, ast.Attribute) and
             n.attr == attr and dotted(n.value) == "self" and isinstance(n.ctx, ast.Load) and
             _value_use(n)]
    conditional = _guards(stmt, method)
    reused = any(script.enclosing_function(r) is not method or r.lineno < stmt.lineno or
                 conditional for r in reads)
    init = next(b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "__init__")
    if not reused or _resets(cls, init, method, attr) or _refreshed(script, cls, method):
        return None
    words = _GRAD_WORDS | flags
    if any(_mentions(g, words, method) for g in conditional):
        return None
    for r in reads:
        if any(_mentions(g, words, method) for g in _guards(r, script.enclosing_function(r))):
            return None
    return CachedGraph(cls, f"self.{attr}", stmt, source)


def _forward_path(cls: ast.ClassDef) -> list[ast.FunctionDef]:
    """``forward`` (and ``__call__``) and the methods of the class they call on ``self``: where
    a read feeds the next step's graph (a getter for plotting does not)."""
    methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
    memo = cls.__dict__.get("_tg_forward_path")
    if memo is not None:
        return memo
    todo = [methods[n] for n in ("forward", "__call__") if n in methods]
    found: list[ast.FunctionDef] = []
    while todo:
        m = todo.pop()
        if m in found:
            continue
        found.append(m)
        for n in ast.walk(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    dotted(n.func.value) == "self" and n.func.attr in methods:
                todo.append(methods[n.func.attr])
    cls._tg_forward_path = found  # type: ignore[attr-defined]
    return found


def _stored(stmt: ast.AST) -> tuple[str, ast.expr] | None:
    """(attribute, value) of ``self.C = v``, ``self.C[key] = v`` (a cache keyed by size) or
    ``self.register_buffer("C", v)`` (a table rebuilt when a longer sequence comes)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if isinstance(target, ast.Subscript):
            target = target.value
        t = dotted(target) or ""
        if t.startswith("self.") and t.count(".") == 1:
            return t[5:], stmt.value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if dotted(call.func) == "self.register_buffer" and len(call.args) >= 2 and \
                isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            return call.args[0].value, call.args[1]
    return None


def _memoized(script: Script, method: ast.FunctionDef, learnable: set[str]
              ) -> tuple[str, str] | None:
    """A method under ``functools.lru_cache``/``cache`` whose result reads a learnable
    attribute: every later call with the same arguments returns the first call's tensor."""
    deco = next((d for d in method.decorator_list if (dotted(
        d.func if isinstance(d, ast.Call) else d) or "").rsplit(".", 1)[-1] in
        ("lru_cache", "cache")), None)
    if deco is None or script.grad_disabled(method):
        return None
    for r in walk_local(method):
        if isinstance(r, ast.Return) and r.value is not None:
            refs = _self_refs(script, r.value, r, 6)
            source = next((x for x in sorted(refs or ()) if x in learnable), None)
            if source is not None:
                name = (dotted(deco.func if isinstance(deco, ast.Call) else deco) or "cache")
                return name.rsplit(".", 1)[-1], source
    return None


def _self_refs(script: Script, expr: ast.AST, at: ast.AST, depth: int) -> set[str] | None:
    """The ``self`` attributes ``expr`` reads, through local names; None when cut. What goes
    only into a comparison (a boolean has no graph) or a plain function of the project (what
    it returns is unknown) is not counted."""
    out: set[str] = set()
    for n in _walk_pruned(script, expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in CUT_ATTRS:
            return None
        if isinstance(n, ast.Attribute) and n.attr == "data":
            return None
        if isinstance(n, ast.Attribute) and dotted(n.value) == "self":
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and depth > 0:
            value = last_assignment(n.id, at)
            if value is not None and value is not expr:
                inner = _self_refs(script, value, value, depth - 1)
                if inner is None:
                    return None
                out |= inner
    return out


def _walk_pruned(script: Script, expr: ast.AST) -> list[ast.AST]:
    out, todo = [], [expr]
    while todo:
        n = todo.pop()
        out.append(n)
        if isinstance(n, ast.Compare):
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                not (script.call_qualname(n) or "").startswith("torch."):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


def _value_use(read: ast.Attribute) -> bool:
    """Not only a test of whether the cache is there (``self.c is None``, ``exists(self.c)``,
    ``self.c.shape[0] < n``)."""
    p = parent(read)
    if isinstance(p, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
        return False
    if isinstance(p, ast.Call) and (dotted(p.func) or "").rsplit(".", 1)[-1] in _NONE_TESTS:
        return False
    if isinstance(p, ast.Attribute) and p.attr in ("shape", "size", "device", "dtype"):
        return False
    return True


def _guards(node: ast.AST, func: ast.AST | None) -> list[ast.expr]:
    """The tests of the ``if``s (and conditional expressions) around ``node`` in ``func``, and
    of the ``if ...: return`` above it."""
    out: list[ast.expr] = []
    child, p = node, parent(node)
    while p is not None:
        if isinstance(p, (ast.If, ast.IfExp, ast.While)) and child is not p.test:
            out.append(p.test)
        for body in (getattr(p, "body", None), getattr(p, "orelse", None)):
            if isinstance(body, list) and child in body:  # if torch.is_grad_enabled(): return
                out += [s.test for s in body[:body.index(child)] if isinstance(s, ast.If)
                        and s.body and isinstance(s.body[-1], (ast.Return, ast.Raise))]
        if p is func:
            break
        child, p = p, parent(p)
    return out


def _mentions(test: ast.AST, words: set[str], func: ast.AST, depth: int = 2) -> bool:
    for n in ast.walk(test):
        if isinstance(n, ast.Attribute) and n.attr in words or \
                isinstance(n, ast.Name) and n.id in words:
            return True
        if isinstance(n, ast.Name) and depth > 0:
            value = last_assignment(n.id, test)
            if value is not None and _mentions(value, words, func, depth - 1):
                return True
    return False


def _refreshed(script: Script, cls: ast.ClassDef, method: ast.FunctionDef) -> bool:
    """The store is in a method outside the forward path that the file calls inside a loop
    (``model.process_support_set(support, labels)`` before each episode's forward, as
    prototypical networks do): the cache is rebuilt, with a new graph, at every step."""
    if method in _forward_path(cls):
        return False
    return any(isinstance(call.func, ast.Attribute) and call.func.attr == method.name and
               dotted(call.func.value) != "self" and script.enclosing_loops(call)
               for call in script.calls)


def _resets(cls: ast.ClassDef, init: ast.FunctionDef, method: ast.FunctionDef,
            attr: str) -> bool:
    """Another method empties the cache (``self.c = None`` in ``reset_cache()``)."""
    for m in cls.body:
        if not isinstance(m, ast.FunctionDef) or m is init or m is method:
            continue
        for n in ast.walk(m):
            if isinstance(n, ast.Assign) and any(dotted(t) == f"self.{attr}" for t in n.targets):
                return True
    return False
