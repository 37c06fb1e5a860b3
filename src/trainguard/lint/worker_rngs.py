"""RNG objects that the objects of a dataset own, whichever class holds them: the dataset itself,
or a transform handed to it (``Compose([RandFlip(), RandShift()])``), defined in this file or in
another file of the project. DataLoader copies the dataset, with everything it holds, into each
worker, so an RNG object created before the copy draws the same numbers in every worker
(https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading; transforms
that own a ``RandomState``: https://github.com/wolny/pytorch-3dunet/issues/32).

An RNG counts when it is created (``np.random.RandomState``, ``default_rng``, ``random.Random``,
``torch.Generator``) in the class body, in ``__init__`` or in a method ``__init__`` calls (a
``set_random_state(seed)`` helper, through same-project base classes), and read on the per-item
path (``__getitem__``, ``__call__``, ``__iter__`` and the methods they call). Silent when that
path itself reseeds or replaces it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, parent, self_attr
from trainguard.lint.callgraph import ClassRef
from trainguard.lint.script import Script

__all__ = ["HeldRng", "held_rngs", "RNG_CTORS", "rng_ctor"]

RNG_CTORS = ("numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
             "random.Random", "torch.Generator")
_PER_ITEM = ("__getitem__", "__getitems__", "__call__", "__iter__", "__next__")
_RESEED = {"manual_seed", "seed", "setstate", "set_state"}
_DATASET_WORDS = ("Dataset", "Folder", "DataPipe")


@dataclass(frozen=True, slots=True)
class HeldRng:
    cls: ClassRef  # the class whose instances the dataset holds
    attr: str
    created: ast.AST  # the RNG constructor call (in cls's file, or a base's)
    script: Script  # the file of ``created``
    setter: ast.Call | None = None  # ``Flip().set_random_state(seed)`` in this file: made there


def held_rngs(script: Script) -> list[HeldRng]:
    """RNGs held by objects that this file builds and hands to a dataset or DataLoader."""
    out: list[HeldRng] = []
    seen: set[int] = set()
    for call in script.calls:
        ref = script.graph.class_named(dotted(call.func))
        if ref is None or id(ref.node) in seen or not _reaches_dataset(script, call, ref):
            continue
        seen.add(id(ref.node))
        per_item = _per_item_methods(ref)
        if not per_item:
            continue
        set_by = _setter_made(call, ref)
        unset = _left_none(ref, call)
        for attr, created, src, via in _created_before_copy(ref):
            if attr in set_by:
                continue
            if _read_in(per_item, attr) and not _reseeded_in(per_item, attr, unset):
                # made by a setter the class's own __init__ calls (`self.set_random_state(seed)`
                # with a mixin's setter): that call, in this file, is the class's line
                setter = via if via is not None and ref.script is script and \
                    dotted(via.func.value) == "self" and any(  # type: ignore[attr-defined]
                        w in (dotted(b) or "") for b in ref.node.bases
                        for w in _DATASET_WORDS) else None
                out.append(HeldRng(ref, attr, created, src, setter))
        for attr, (setter, created, src) in set_by.items():
            if _read_in(per_item, attr) and not _reseeded_in(per_item, attr):
                out.append(HeldRng(ref, attr, created, src, setter))
    return out


def _setter_made(call: ast.Call, ref: ClassRef) -> dict[str, tuple[ast.Call, ast.AST, Script]]:
    """``TimeMask(6).set_random_state(seed)``: a method called on the object as it is built
    that stores a new RNG on it (a MONAI-style ``Randomizable`` setter), by attribute: (the
    setter's call, the RNG constructor in the setter, its file). The dataset's line that built
    and seeded the object is where the copied generator was made."""
    up = parent(call)
    outer = parent(up) if isinstance(up, ast.Attribute) else None
    if not (isinstance(outer, ast.Call) and outer.func is up):
        return {}
    m = ref.script.graph.method(ref, up.attr)  # type: ignore[union-attr]
    if m is None:
        return {}
    return {attr: (outer, n.value, m.script) for n in ast.walk(m.func)
            for attr in _stored_rngs(m.script, n)}


def _hierarchy(ref: ClassRef, depth: int = 4) -> list[ClassRef]:
    out, todo = [], [(ref, depth)]
    while todo:
        r, d = todo.pop(0)
        if any(r.node is o.node for o in out):
            continue
        out.append(r)
        if d > 0:
            for b in r.node.bases:
                other = r.script.graph.class_named(dotted(b))
                if other is not None:
                    todo.append((other, d - 1))
    return out


def rng_ctor(value: ast.AST) -> ast.AST:
    """The constructor call in ``torch.Generator().manual_seed(seed)`` (which returns the
    generator it seeds); ``value`` itself otherwise."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr == "manual_seed":
        value = value.func.value
    return value


def _stored_rngs(script: Script, node: ast.AST) -> list[str]:
    """The ``self`` attributes an assignment stores a new RNG in (``self.rng =
    np.random.default_rng(seed)``)."""
    if not (isinstance(node, ast.Assign) and _is_rng(script, node.value)):
        return []
    return [a for a in map(self_attr, node.targets) if a]


def _is_rng(script: Script, value: ast.AST) -> bool:
    value = rng_ctor(value)
    return isinstance(value, ast.Call) and (script.call_qualname(value) or "").endswith(RNG_CTORS)


def _created_before_copy(ref: ClassRef) -> list[tuple[str, ast.AST, Script, ast.Call | None]]:
    """(attr, constructor call, its file, the ``self.<method>(...)`` call of ``__init__`` that
    runs the method making it, or None) for RNGs the class body, ``__init__`` or a method that
    ``__init__`` calls on ``self`` creates. A class attribute that ``__init__`` replaces on the
    instance (a mixin's default ``R = RandomState()``) is not what the workers copy."""
    out: list[tuple[str, ast.AST, Script]] = []
    for r in _hierarchy(ref):
        for stmt in r.node.body:  # class attributes: shared, and copied all the same
            if isinstance(stmt, ast.Assign) and _is_rng(r.script, stmt.value):
                out += [(t.id, stmt.value, r.script) for t in stmt.targets
                        if isinstance(t, ast.Name)]
    init = ref.script.graph.method(ref, "__init__")
    if init is None:
        return [(a, c, s, None) for a, c, s in out]
    bases = {r.node.name: r for r in _hierarchy(ref)}
    funcs, todo = [], [init]
    via: dict[int, ast.Call] = {}  # id(method's node) -> the call of __init__ that runs it
    while todo and len(funcs) < 8:
        t = todo.pop()
        if any(t.func is f.func for f in funcs):
            continue
        funcs.append(t)
        for n in ast.walk(t.func):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                continue
            owner = dotted(n.func.value)
            if owner in ("self", "super()"):
                m = ref.script.graph.method(ref, n.func.attr)
            elif owner in bases and n.args and dotted(n.args[0]) == "self":
                # a mixin's method called on self by name: ``Seedable.__init__(self, seed=s)``
                m = ref.script.graph.method(bases[owner], n.func.attr)
            else:
                continue
            if m is not None:
                todo.append(m)
                if t is init and n.func.attr != "__init__":
                    via.setdefault(id(m.func), n)
    body = len(out)  # (the class attributes come first)
    made_by: list[ast.Call | None] = [None] * body  # per entry: the call of __init__ that made it
    for t in funcs:
        local: dict[str, ast.AST] = {}
        for n in ast.walk(t.func):
            if isinstance(n, ast.Assign) and _is_rng(t.script, n.value):
                out += [(attr, n.value, t.script) for attr in _stored_rngs(t.script, n)]
                local.update((x.id, n.value) for x in n.targets if isinstance(x, ast.Name))
        out += _handed_on(t, local, {a: (c, s) for a, c, s in out})
        made_by += [via.get(id(t.func))] * (len(out) - len(made_by))
    on_instance = {a for a, _, _ in out[body:]}
    return [(a, c, s, m) for i, ((a, c, s), m) in enumerate(zip(out, made_by))
            if i >= body or a not in on_instance]


def _handed_on(t, local: dict[str, ast.AST],  # type: ignore[no-untyped-def]
               held: dict[str, tuple[ast.AST, Script]]) -> list[tuple[str, ast.AST, Script]]:
    """An RNG handed to an object that the class keeps (``self.transform =
    RandomFlip(self.random_state)``, a local ``rs`` or a constructor call passed the same
    way): the kept object
    draws from it on the per-item path, so it counts as held under that object's name."""
    out = []
    for n in ast.walk(t.func):
        if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
            continue
        keys = [d[5:] for d in map(dotted, n.targets)
                if d and d.startswith("self.") and d.count(".") == 1]
        built = (dotted(n.value.func) or "").rsplit(".", 1)[-1]
        if not keys or not built[:1].isupper():
            continue  # an object built from it (a class), not values computed with it
        args = [*n.value.args, *(k.value for k in n.value.keywords)]
        for a in args:
            d = dotted(a) or ""
            if isinstance(a, ast.Name) and a.id in local:
                out += [(k, local[a.id], t.script) for k in keys]
            elif _is_rng(t.script, a):  # Flip(np.random.RandomState(seed))
                out += [(k, a, t.script) for k in keys]
            elif d.startswith("self.") and d[5:] in held:
                created, src = held[d[5:]]
                out += [(k, created, src) for k in keys]
    return out


def _per_item_methods(ref: ClassRef) -> list[ast.AST]:
    """The methods a worker runs for each item, and the ``self`` methods they call."""
    todo = [m for name in _PER_ITEM if (m := ref.script.graph.method(ref, name)) is not None]
    found: list = []
    while todo and len(found) < 12:
        t = todo.pop()
        if any(t.func is f.func for f in found):
            continue
        found.append(t)
        for n in ast.walk(t.func):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    dotted(n.func.value) == "self":
                m = ref.script.graph.method(ref, n.func.attr)
                if m is not None:
                    todo.append(m)
    return [t.func for t in found]


def _read_in(funcs: list[ast.AST], attr: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == attr and dotted(n.value) == "self"
               and isinstance(n.ctx, ast.Load) for f in funcs for n in ast.walk(f))


def _reseeded_in(funcs: list[ast.AST], attr: str, unset: frozenset[str] = frozenset()) -> bool:
    """The per-item path reseeds or replaces ``self.<attr>``; a replacement under ``if
    self.seed is not None:`` (or ``if self.seed:``) does not count when this construction left
    ``self.seed`` at its None default and the per-item path never sets it: it never runs."""
    unset = unset - {n.attr for f in funcs for n in ast.walk(f)
                     if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    for f in funcs:
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr in _RESEED and dotted(n.func.value) == f"self.{attr}":
                return True
            if isinstance(n, ast.Assign) and any(dotted(t) == f"self.{attr}" for t in n.targets) \
                    and not _needs_set(n, f, unset):
                return True
    return False


def _needs_set(node: ast.AST, top: ast.AST, unset: frozenset[str]) -> bool:
    """``node`` runs only when an attribute in ``unset`` (None) is set."""
    while (up := parent(node)) is not None and node is not top:
        test = up.test if isinstance(up, ast.If) and node in up.body else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
                isinstance(test.ops[0], ast.IsNot) and const_is_none(test.comparators[0]):
            test = test.left
        if test is not None and self_attr(test) in unset:
            return True
        node = up
    return False


def const_is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _left_none(ref: ClassRef, call: ast.Call) -> frozenset[str]:
    """Attributes ``__init__`` sets from a parameter that ``call`` leaves at its None default
    (``Compose(transforms)`` for ``def __init__(self, transforms, seed=None)``)."""
    init = ref.script.graph.method(ref, "__init__")
    if init is None or any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return frozenset()
    args = init.func.args
    params = [a.arg for a in [*args.posonlyargs, *args.args][1:]]
    passed = set(params[:len(call.args)]) | {k.arg for k in call.keywords}
    pairs = [*zip(params[len(params) - len(args.defaults):], args.defaults),
             *zip((a.arg for a in args.kwonlyargs), args.kw_defaults)]
    left = {p for p, d in pairs if d is not None and const_is_none(d) and p not in passed}
    sets = [(self_attr(t), n.value) for n in ast.walk(init.func) if isinstance(n, ast.Assign)
            for t in n.targets if self_attr(t)]
    return frozenset(a for a, v in sets if isinstance(v, ast.Name) and v.id in left
                     and sum(b == a for b, _ in sets) == 1)


def _reaches_dataset(script: Script, call: ast.Call, ref: ClassRef) -> bool:
    """The object ``call`` builds ends up in a dataset: it is a dataset, or it is built inside
    the arguments of a dataset, a DataLoader or a ``transform=`` keyword, directly or through
    one name (``tf = Compose([...]); ds = Digits(x, y, tf)``)."""
    if any(b.endswith(_DATASET_WORDS) for b in script.graph.bases(ref)):
        return True
    return _flows_to_consumer(script, call, 3)


def _flows_to_consumer(script: Script, node: ast.AST, depth: int) -> bool:
    """Through one assigned name (``tf = Compose([...]); Digits(x, y, tf)``) or what a
    factory returns (``def build_transforms(cfg): return Compose([...])``), to its callers."""
    if _inside_consumer(script, node):
        return True
    stmt = node
    while not isinstance(stmt, ast.stmt) and parent(stmt) is not None:
        stmt = parent(stmt)
    if depth <= 0:
        return False
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Name):
        name, scope = stmt.targets[0].id, script.enclosing_function(stmt)
        loads = [n for n in _loads(script, name) if script.enclosing_function(n) is scope]
        return any(_flows_to_consumer(script, n, depth - 1) for n in loads)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Attribute) and \
            isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == "self":
        # self.transform = Crop(...).set_random_state(SEED) in a dataset's own method
        cls = script.enclosing_class(stmt)
        ref = script.graph.class_named(cls.name) if cls is not None else None
        return ref is not None and ref.node is cls and \
            any(b.endswith(_DATASET_WORDS) for b in script.graph.bases(ref))
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Attribute) and \
            isinstance(stmt.targets[0].value, ast.Name):  # train_ds.aug = Jitter()
        name, scope = stmt.targets[0].value.id, script.enclosing_function(stmt)
        return any(script.enclosing_function(n) is scope and _inside_consumer(script, n)
                   for n in _loads(script, name))
    if isinstance(stmt, ast.Return):
        func = script.enclosing_function(stmt)
        return func is not None and any(_flows_to_consumer(script, c, depth - 1)
                                        for c in script.call_sites(func))
    return False


def _loads(script: Script, name: str) -> list[ast.Name]:
    table = script.__dict__.get("_tg_name_loads")
    if table is None:
        table = {}
        for n in script.nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                table.setdefault(n.id, []).append(n)
        script.__dict__["_tg_name_loads"] = table
    return table.get(name, [])


def _inside_consumer(script: Script, node: ast.AST) -> bool:
    child, p = node, parent(node)
    while p is not None and not isinstance(p, ast.stmt):
        if isinstance(p, ast.keyword) and p.arg in ("transform", "transforms", "dataset",
                                                     "target_transform", "collate_fn"):
            return True
        if isinstance(p, ast.Call) and child is not p.func:
            name = (script.call_qualname(p) or dotted(p.func) or "").rsplit(".", 1)[-1]
            if name == "DataLoader" or name.endswith(_DATASET_WORDS):
                return True
            ref = script.graph.class_named(dotted(p.func))
            if ref is not None and any(b.endswith(_DATASET_WORDS)
                                       for b in script.graph.bases(ref)):
                return True
        child, p = p, parent(p)
    return False
