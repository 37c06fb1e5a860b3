"""Which function a call runs: a call graph that knows receiver types.

``f(x)`` and ``self.f(x)`` name their target directly. ``trainer.fit()`` and ``self.model.m()``
need the receiver's class: :class:`CallGraph` infers it from what the name holds (``trainer =
Trainer(...)``, ``self.model = model`` with ``Trainer(model=Net())`` at the instantiation,
``model = make_model()`` whose ``return Net()`` builds it, ``for cb in [Logger(), Stopper()]``,
``copy.deepcopy(model)``, an attribute set on an instance from outside its class: ``trainer =
Trainer(...)`` then ``trainer.callbacks = [Logger()]``), follows same-file base classes
(``super().m()``, inherited methods), and resolves calling a module instance (``model(x)``) to
its ``forward`` (or ``__call__``).

Classes and functions imported from another file of the same project (``from helpers import
EarlyStopping``) resolve into that file, parsed once (``trainguard.lint.project`` finds it as
Python would); installed packages are never read. Every answer is bounded (depth, fan-out) so a
large file stays fast, and nothing imports torch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainguard.lint.astutil import (COMPREHENSIONS, SCOPES, assigned_pairs, children, dotted,
                                     parent, walk_local)

if TYPE_CHECKING:
    from trainguard.lint.script import Func, Script

__all__ = ["CallGraph", "ClassRef", "Target", "parameter_default"]

# Module methods that return the module itself (``Net().to(device)`` is still a ``Net``).
RETURNS_SELF = {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval",
                 "requires_grad_", "share_memory", "type", "apply", "to_empty"}
_COPIES = {"copy.deepcopy", "copy.copy"}
_MAX_TYPES = 6
_MAX_FOREIGN = 16  # imported names resolved into other files, per file


@dataclass(frozen=True, eq=False)
class ClassRef:
    """A class defined in ``script`` (the linted file or another file of the project)."""

    script: "Script"
    node: ast.ClassDef

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassRef) and other.node is self.node

    def __hash__(self) -> int:
        return id(self.node)


@dataclass(frozen=True, eq=False)
class Target:
    """A function a call runs; ``instance`` is True for ``model(x)`` running ``forward``."""

    script: "Script"
    func: "Func"
    instance: bool = False
    bound: bool = False  # a method called on an object: its first parameter is the receiver

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and other.func is self.func

    def __hash__(self) -> int:
        return id(self.func)


class CallGraph:
    """Receiver types and call targets for one script (see the module docstring)."""

    def __init__(self, script: "Script") -> None:
        self.script = script
        self._types: dict[tuple[int, bool], list[ClassRef]] = {}
        self._busy: set[tuple[int, bool]] = set()
        self._targets: dict[tuple[int, bool], list[Target]] = {}
        self._sites: dict[tuple[int, bool], list[ast.Call]] = {}
        self._imports: dict[str, object] | None = None
        self._cycles = 0  # answers cut short by a cycle are not remembered
        self._outside: dict[str, list[tuple[ast.expr, ast.expr]]] | None = None

    # -- classes -------------------------------------------------------------------------------

    def class_named(self, name: str | None) -> ClassRef | None:
        """The class a (dotted) name refers to here: same-file, or imported from the project."""
        if not name:
            return None
        s = self.script
        if name in s.classes:
            return ClassRef(s, s.classes[name])
        found = self._imported(name)
        return found if isinstance(found, ClassRef) else None

    def function_named(self, name: str | None) -> Target | None:
        if not name:
            return None
        s = self.script
        defs = [d for d in s.functions.get(name, ()) if s.enclosing_class(d) is None
                and s.enclosing_function(d) is None]
        if len(defs) == 1:
            return Target(s, defs[0])
        found = self._imported(name)
        return found if isinstance(found, Target) else None

    def _imported(self, name: str) -> object:
        from trainguard.lint.project import foreign_definition

        if self._imports is None:
            self._imports = {}
        if name not in self._imports:
            if name.split(".")[0] not in self.script.project_imports:
                return None
            if len(self._imports) >= _MAX_FOREIGN:
                return None  # a file that imports half its project: the rest stays unknown
            self._imports[name] = foreign_definition(self.script, name)
        return self._imports[name]

    def method_names(self) -> set[str]:
        """Names of the methods of every class of this file and of the project classes it
        imports (and their bases): a call ``x.name()`` with another name runs none of them."""
        found = self.__dict__.get("_method_names")
        if found is None:
            found = set()
            from trainguard.lint.project import foreign_method_names

            refs = [ClassRef(self.script, c) for c in self.script.classes.values()]
            for name in self._constructed_imports()[:_MAX_FOREIGN]:
                found |= foreign_method_names(self.script, name)
            seen: set[int] = set()
            while refs:
                ref = refs.pop()
                if id(ref.node) in seen:
                    continue
                seen.add(id(ref.node))
                found.update(b.name for b in ref.node.body
                             if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)))
                for base in ref.node.bases:
                    other = ref.script.graph.class_named(dotted(base))
                    if other is not None:
                        refs.append(other)
            self.__dict__["_method_names"] = found
        return found

    def _constructed_imports(self) -> list[str]:
        """Names imported from project files that the file calls (``Trainer(...)``,
        ``helpers.EarlyStopping(...)``): the only foreign classes whose instances it can hold."""
        imports = self.script.project_imports
        out = []
        for call in self.script.calls:
            name = dotted(call.func)
            if name and name.split(".")[0] in imports and name.count(".") <= 1 and \
                    name not in out:
                out.append(name)
        return out

    def method(self, cls: ClassRef, name: str, _seen: frozenset[int] = frozenset()
               ) -> Target | None:
        """``name`` defined on ``cls`` or the first same-project base that defines it."""
        if id(cls.node) in _seen:
            return None
        for b in cls.node.body:
            if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == name:
                return Target(cls.script, b, bound=True)
        for base in cls.node.bases:
            ref = cls.script.graph.class_named(dotted(base))
            if ref is not None:
                found = self.method(ref, name, _seen | {id(cls.node)})
                if found is not None:
                    return found
        return None

    def bases(self, cls: ClassRef, _depth: int = 4) -> list[str]:
        """Qualified names of ``cls``'s bases, through same-project base classes."""
        out = []
        for base in cls.node.bases:
            ref = cls.script.graph.class_named(dotted(base))
            if ref is not None and _depth > 0 and ref.node is not cls.node:
                out.extend(self.bases(ref, _depth - 1))
            else:
                out.append(cls.script.qualname(base) or "")
        return out

    def is_module_class(self, cls: ClassRef) -> bool:
        """A subclass of ``nn.Module`` (through same-project bases), or a class with ``forward``."""
        if self.method(cls, "forward") is not None:
            return True
        return any(b.startswith("torch.nn.") or b in ("nn.Module", "Module")
                   for b in self.bases(cls))

    def in_module_class(self, node: ast.AST) -> bool:
        """``node`` lies in a class of the file that is an ``nn.Module`` (there ``self`` is
        the module: ``self(x)`` runs its ``forward``, ``self.encoder = enc`` registers a
        child that the module's ``eval()`` reaches)."""
        cls = self.script.enclosing_class(node)
        ref = self.class_named(cls.name) if cls is not None else None
        return ref is not None and self.is_module_class(ref)

    # -- types ---------------------------------------------------------------------------------

    def types(self, expr: ast.AST | None, *, params: bool = True, _depth: int = 7
              ) -> list[ClassRef]:
        """The same-project classes ``expr`` may be an instance of (empty: unknown)."""
        if expr is None or _depth <= 0:
            return []
        k = (id(expr), params)
        if k in self._types:
            return self._types[k]
        if k in self._busy:
            self._cycles += 1
            return []
        self._busy.add(k)
        cycles = self._cycles
        try:
            found = _dedupe(self._types_of(expr, params, _depth))[:_MAX_TYPES]
        finally:
            self._busy.discard(k)
        if self._cycles == cycles or not self._busy:
            self._types[k] = found
        return found

    def _types_of(self, expr: ast.AST, params: bool, depth: int) -> list[ClassRef]:
        s = self.script
        if isinstance(expr, ast.Call):
            f = expr.func
            ref = self.class_named(dotted(f))
            if ref is not None:
                return [ref]
            q = s.call_qualname(expr) or ""
            if q in _COPIES and expr.args:
                return self.types(expr.args[0], params=params, _depth=depth - 1)
            if isinstance(f, ast.Attribute) and f.attr in RETURNS_SELF:
                return self.types(f.value, params=params, _depth=depth - 1)
            out = []
            for t in self.targets(expr, params=params, _depth=depth - 1):
                if t.instance:
                    continue
                for r in _returns(t.func):
                    out.extend(t.script.graph.types(r.value, params=params, _depth=depth - 1))
            return out
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return []
        if isinstance(expr, ast.IfExp):  # Saver(...) if is_primary else None
            return self.types(expr.body, params=params, _depth=depth - 1) + \
                self.types(expr.orelse, params=params, _depth=depth - 1)
        if isinstance(expr, ast.Name):
            return self._name_types(expr, params, depth)
        if isinstance(expr, ast.Attribute):
            return self._attr_types(expr, params, depth)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Call) and \
                isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, int):
            out = []  # build(cfg)[1]: that element of the tuple the function returns
            for t in self.targets(expr.value, params=params, _depth=depth - 1):
                for r in [] if t.instance else _returns(t.func):
                    if isinstance(r.value, (ast.Tuple, ast.List)) and \
                            expr.slice.value < len(r.value.elts):
                        out.extend(t.script.graph.types(r.value.elts[expr.slice.value],
                                                        params=params, _depth=depth - 1))
            return out
        if isinstance(expr, ast.Subscript):  # callbacks[0]
            return self.element_types(expr.value, params=params, _depth=depth - 1)
        return []

    def _name_types(self, name: ast.Name, params: bool, depth: int) -> list[ClassRef]:
        s = self.script
        scope = _scope(name)
        out: list[ClassRef] = []
        if name.id == "self" and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cls = s.enclosing_class(name)  # `return self` from fit(): the estimator itself
            if cls is not None:
                return [ClassRef(s, cls)]
        for value in _assigned(scope, name.id):
            out.extend(self.types(value, params=params, _depth=depth - 1))
        for loop in _loops_binding(scope, name.id):
            out.extend(self.element_types(loop.iter, params=params, _depth=depth - 1))
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arg = _param(scope, name.id)
            if arg is not None and params:
                out.extend(self._param_types(scope, arg, depth))
            if arg is None and not out:  # a global read inside a function
                for value in _assigned(s.tree, name.id):
                    out.extend(self.types(value, params=params, _depth=depth - 1))
                for loop in _loops_binding(s.tree, name.id):
                    out.extend(self.element_types(loop.iter, params=params, _depth=depth - 1))
        return out

    def _attr_types(self, attr: ast.Attribute, params: bool, depth: int) -> list[ClassRef]:
        s = self.script
        if isinstance(attr.value, ast.Name) and attr.value.id == "self":
            cls = s.enclosing_class(attr)
            owners = [ClassRef(s, cls)] if cls is not None else []
        else:
            owners = self.types(attr.value, params=params, _depth=depth - 1)
        out: list[ClassRef] = []
        for owner in owners:
            out.extend(owner.script.graph._member_types(owner, attr.attr, params, depth - 1))
        return out

    def _member_types(self, owner: ClassRef, name: str, params: bool, depth: int
                      ) -> list[ClassRef]:
        out: list[ClassRef] = []
        for value in self_assigned(owner.node, name) + \
                self.set_on_instances(owner, name, params=params, _depth=depth):
            out.extend(self.types(value, params=params, _depth=depth))
        return out

    def set_on_instances(self, owner: ClassRef, name: str, *, params: bool = True,
                         _depth: int = 5) -> list[ast.expr]:
        """The values this file assigns to attribute ``name`` of an instance of ``owner`` from
        outside the class (``trainer = Trainer(model, [])`` then ``trainer.callbacks =
        [Logger(), Scheduler(sched)]``)."""
        if self._outside is None:
            self._outside = {}
            for n in self.script.nodes:
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and \
                        getattr(n, "value", None) is not None:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    for t, v in assigned_pairs(targets, n.value):  # type: ignore[arg-type]
                        if isinstance(t, ast.Attribute) and not (
                                isinstance(t.value, ast.Name) and t.value.id == "self"):
                            self._outside.setdefault(t.attr, []).append((t.value, v))
        if _depth <= 0:
            return []
        return [v for obj, v in self._outside.get(name, ())
                if owner in self.types(obj, params=params, _depth=_depth - 1)]

    def element_types(self, expr: ast.AST | None, *, params: bool = True, _depth: int = 5
                      ) -> list[ClassRef]:
        """Types of the elements of a list/tuple value (``[Logger(), Stopper()]``, a
        comprehension ``[Client(s) for s in shards]``, a name or a parameter bound to one,
        ``list(x)``, ``self.callbacks``), of the values of a dict (``{n: Meter() for n in
        names}``, what ``meters[k]`` looks up)."""
        if expr is None or _depth <= 0:
            return []
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            out: list[ClassRef] = []
            for e in expr.elts:
                out.extend(self.types(e.value if isinstance(e, ast.Starred) else e,
                                      params=params, _depth=_depth - 1))
            return out
        if isinstance(expr, ast.Dict):  # {"recon": Meter(), ...}: what a key looks up
            return [t for v in expr.values
                    for t in self.types(v, params=params, _depth=_depth - 1)]
        if isinstance(expr, COMPREHENSIONS):
            # [Client(shard) for shard in shards], {n: Meter(n) for n in names}: every element
            # is what ``elt`` builds; an ``elt`` that is the loop's own name holds the elements
            # of what it iterates
            elt = expr.value if isinstance(expr, ast.DictComp) else expr.elt
            gen = next((g for g in expr.generators if isinstance(elt, ast.Name) and
                        isinstance(g.target, ast.Name) and g.target.id == elt.id), None)
            if gen is not None:
                return self.element_types(gen.iter, params=params, _depth=_depth - 1)
            return self.types(elt, params=params, _depth=_depth - 1)
        if isinstance(expr, ast.Call) and dotted(expr.func) in ("list", "tuple") and expr.args:
            return self.element_types(expr.args[0], params=params, _depth=_depth - 1)
        if isinstance(expr, ast.Name):
            scope = _scope(expr)
            out = []
            for value in _assigned(scope, expr.id):
                out.extend(self.element_types(value, params=params, _depth=_depth - 1))
            for call in _appends(scope, expr.id):
                out.extend(self.types(call.args[0], params=params, _depth=_depth - 1))
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and params:
                arg = _param(scope, expr.id)
                if arg is not None:
                    for value in self._param_values(scope, arg):
                        out.extend(self.element_types(value, params=False, _depth=_depth - 1))
            return out
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and \
                expr.value.id == "self":
            cls = self.script.enclosing_class(expr)
            out = []
            if cls is not None:
                for value in self_assigned(cls, expr.attr) + self.set_on_instances(
                        ClassRef(self.script, cls), expr.attr, params=params, _depth=_depth):
                    out.extend(self.element_types(value, params=params, _depth=_depth - 1))
            return out
        return []

    def _param_types(self, func: "Func", arg: ast.arg, depth: int) -> list[ClassRef]:
        out: list[ClassRef] = []
        # a parameter filled from a parameter of the caller (``train(model)`` calls
        # ``validate(model)``): followed one more level while the depth allows
        for value in self._param_values(func, arg):
            out.extend(self.types(value, params=depth > 5, _depth=depth - 1))
        return out

    def parameter_values(self, func: "Func", name: str) -> list[ast.expr] | None:
        """The arguments bound to parameter ``name`` of ``func`` at every call site in this
        file (see :meth:`_param_values`); None when ``func`` has no such parameter."""
        arg = next((a for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
                    if a.arg == name), None)
        return self._param_values(func, arg) if arg is not None else None

    def _param_values(self, func: "Func", arg: ast.arg) -> list[ast.expr]:
        """The arguments bound to ``arg`` at every call site of ``func`` in this file
        (``__init__``: at every instantiation of its class)."""
        s = self.script
        names = [a.arg for a in func.args.posonlyargs + func.args.args]
        cls = s.enclosing_class(func)
        is_method = cls is not None and not any(
            dotted(d) in ("staticmethod",) for d in func.decorator_list)
        if is_method and names:
            names = names[1:]
        values: list[ast.expr] = []
        if cls is not None and func.name == "__init__":
            sites = [c for c in s.calls if self.class_named(dotted(c.func)) is not None
                     and self.class_named(dotted(c.func)).node is cls]  # type: ignore[union-attr]
        else:
            sites = self.sites(func, params=False) or self.sites(func)
        for call in sites[:8]:
            bound = bind_arguments(names, call)
            if arg.arg in bound:
                values.append(bound[arg.arg])
        default = parameter_default(func, arg)
        if default is not None:
            values.append(default)
        return values

    # -- targets -------------------------------------------------------------------------------

    def targets(self, call: ast.Call, *, params: bool = True, _depth: int = 7) -> list[Target]:
        """The functions ``call`` may run (same file or same project), other than a module's
        ``forward`` run by calling the module (``instance_targets``)."""
        k = (-id(call), params)  # negative: never the key of a type question
        if k in self._targets:
            return self._targets[k]
        if k in self._busy:  # a call that resolves through itself
            self._cycles += 1
            return []
        self._busy.add(k)
        cycles = self._cycles
        try:
            found = _dedupe(self._resolve(call, params, _depth))[:_MAX_TYPES]
        finally:
            self._busy.discard(k)
        if self._cycles == cycles or not self._busy:
            self._targets[k] = found
        return found

    def _resolve(self, call: ast.Call, params: bool, depth: int) -> list[Target]:
        s = self.script
        f = call.func
        if isinstance(f, ast.Name):
            local = [d for d in s.functions.get(f.id, ()) if s.enclosing_class(d) is None]
            if len(local) == 1:
                return [Target(s, local[0])]
            if local:
                return []
            t = self.function_named(f.id)
            if t is not None:
                return [t]
            return []  # instantiation (__init__ is no step's event), or a module's forward
            # (``model(x)``: see ``instance_targets``)
        if not isinstance(f, ast.Attribute):
            return []
        recv = f.value
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and \
                recv.func.id == "super":
            cls = s.enclosing_class(call)
            out = []
            if cls is not None:
                for base in cls.bases:
                    ref = self.class_named(dotted(base))
                    m = ref.script.graph.method(ref, f.attr) if ref is not None else None
                    if m is not None:
                        out.append(m)
            return out
        if isinstance(recv, ast.Name) and recv.id == "self":
            cls = s.enclosing_class(call)
            if cls is not None:
                m = self.method(ClassRef(s, cls), f.attr)
                if m is not None and m.script is s and _stub(m.func):
                    m = self._override(cls, f.attr) or m
                return [m] if m is not None else []
            return []
        if isinstance(recv, ast.Name) and recv.id in s.aliases and \
                self._imported(f"{recv.id}.{f.attr}") is not None:
            found = self._imported(f"{recv.id}.{f.attr}")  # helpers.train_step(...)
            return [found] if isinstance(found, Target) else []
        if f.attr not in self.method_names():
            return []
        out = []
        for ref in self.types(recv, params=params, _depth=depth):
            m = ref.script.graph.method(ref, f.attr)
            if m is not None:
                out.append(m)
        if f.attr == "forward" and not out:
            return []
        return out

    def _override(self, cls: ast.ClassDef, name: str) -> Target | None:
        """The one method ``name`` of a same-file subclass of ``cls``: what ``self.name(...)``
        runs when ``cls`` only declares it (a base trainer's abstract ``training_step`` called
        in its ``fit``). None when no subclass, or several, override it."""
        s = self.script
        found = [m for c in s.classes.values()
                 if any((dotted(b) or "").rsplit(".", 1)[-1] == cls.name for b in c.bases)
                 for m in c.body if isinstance(m, ast.FunctionDef) and m.name == name]
        return Target(s, found[0]) if len(found) == 1 else None

    def _instance_call(self, f: ast.AST, params: bool, depth: int) -> list[Target]:
        names = self.method_names()
        if "forward" not in names and "__call__" not in names:
            return []
        out = []
        for ref in self.types(f, params=params, _depth=depth):
            m = ref.script.graph.method(ref, "forward") or ref.script.graph.method(ref, "__call__")
            if m is not None:
                out.append(Target(m.script, m.func, instance=True, bound=True))
        return out

    def instance_targets(self, call: ast.Call) -> list[Target]:
        """``model(x)``, ``self.net(x)``: the ``forward`` (or ``__call__``) it runs."""
        f = call.func
        if isinstance(f, ast.Name) and (f.id in self.script.functions or
                                        self.class_named(f.id) is not None):
            return []
        if isinstance(f, (ast.Name, ast.Attribute, ast.Subscript)):
            return self._instance_call(f, True, 7)
        if isinstance(f, ast.Call) and isinstance(f.func, ast.Name):  # Runner(step)(loader)
            cls = self.class_named(f.func.id)
            found = self.method(cls, "__call__") if cls is not None else None
            return [Target(found.script, found.func, instance=True)] if found is not None else []
        return []

    def sites(self, func: "Func", *, params: bool = True) -> list[ast.Call]:
        """The calls in this file that may run ``func`` (only calls spelled with its name are
        resolved, so asking costs little in a large file)."""
        k = (id(func), params)
        found = self._sites.get(k)
        if found is None:
            self._sites[k] = []  # calls resolving through their own sites see none
            found = [c for c in self._calls_named().get(func.name, ())
                     if any(t.func is func for t in self.targets(c, params=params))]
            self._sites[k] = found
        return found

    def instance_sites(self, func: "Func") -> list[ast.Call]:
        """The calls in this file that run ``func`` by calling an object (``scaler(x)`` runs
        its ``__call__``, ``self.classify(s, y)`` its ``forward``); empty for other functions.
        Every call of the file is resolved once per function asked about."""
        if func.name not in ("__call__", "forward"):
            return []
        table = self.__dict__.setdefault("_instance_sites", {})
        if id(func) not in table:
            table[id(func)] = [c for c in self.script.calls
                               if any(t.func is func for t in self.instance_targets(c))]
        return table[id(func)]

    def _calls_named(self) -> dict[str, list[ast.Call]]:
        table = self.__dict__.get("_by_name")
        if table is None:
            table = {}
            for call in self.script.calls:
                f = call.func
                name = f.id if isinstance(f, ast.Name) else f.attr \
                    if isinstance(f, ast.Attribute) else None
                if name is not None:
                    table.setdefault(name, []).append(call)
            self.__dict__["_by_name"] = table
        return table


def _stub(func: ast.AST) -> bool:
    """A method with no body of its own (``...``, ``pass``, a docstring, ``raise
    NotImplementedError``): an abstract method a subclass overrides."""
    for stmt in getattr(func, "body", ()):
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and \
                isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.unparse(stmt):
            continue
        return False
    return True


def defaults(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Positional parameter name -> its default expression (the last parameters take them)."""
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    return dict(zip(reversed(names), reversed(func.args.defaults)))


def bind_arguments(names: list[str], call: ast.Call) -> dict[str, ast.expr]:
    """Parameter name -> argument expression for a call (positional, then keywords)."""
    bound: dict[str, ast.expr] = {}
    for name, arg in zip(names, call.args):
        if isinstance(arg, ast.Starred):
            break
        bound[name] = arg
    for kw in call.keywords:
        if kw.arg:
            bound[kw.arg] = kw.value
    return bound


def model_parameters(script: "Script", call: ast.Call) -> tuple[Target, set[str]] | None:
    """The one project function ``call`` runs (else None) and its parameters that ``call``
    binds to a model (``{"net"}`` for ``helper(model, x)``, ``def helper(net, x)``)."""
    targets = [t for t in script.targets(call) if not t.instance]
    if len(targets) != 1:
        return None
    t = targets[0]
    func = t.func
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if t.bound and params and not any(dotted(d) == "staticmethod" for d in func.decorator_list):
        params = params[1:]
    return t, {p for p, a in bind_arguments(params, call).items()
               if (k := script.key(a)) and k != "self" and script.is_model(k)}


def forwards_of(func: ast.AST, models: set[str]) -> list[ast.Call]:
    """The calls of ``models`` in ``func``'s own body (``net(x)``, ``net.forward(x)``)."""
    out = []
    for sub in walk_local(func):
        if isinstance(sub, ast.Call):
            f = sub.func.value if isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "forward" else sub.func
            if isinstance(f, ast.Name) and f.id in models:
                out.append(sub)
    return out


def _dedupe(items: list) -> list:  # type: ignore[type-arg]
    seen: set[int] = set()
    out = []
    for x in items:
        k = hash(x)
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out


def _scope(node: ast.AST) -> ast.AST:
    n = parent(node)
    while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.Lambda, ast.Module)):
        n = parent(n)
    return n if n is not None else node


def _local_nodes(scope: ast.AST) -> list[ast.AST]:
    cached = getattr(scope, "_tg_local_nodes", None)
    if cached is None:
        cached = []
        stack = list(children(scope))
        while stack:
            n = stack.pop()
            cached.append(n)
            if not isinstance(n, SCOPES):
                stack.extend(children(n))
        scope._tg_local_nodes = cached  # type: ignore[attr-defined]
    return cached


def _assigned(scope: ast.AST, name: str) -> list[ast.expr]:
    table = getattr(scope, "_tg_name_values", None)
    if table is None:
        table = {}
        for n in _local_nodes(scope):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        table.setdefault(t.id, []).append(n.value)
                    elif isinstance(t, (ast.Tuple, ast.List)) and \
                            isinstance(n.value, (ast.Tuple, ast.List)) and \
                            len(t.elts) == len(n.value.elts):
                        for te, ve in zip(t.elts, n.value.elts):
                            if isinstance(te, ast.Name):
                                table.setdefault(te.id, []).append(ve)
                    elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(n.value, ast.Call) \
                            and not any(isinstance(te, ast.Starred) for te in t.elts):
                        # model, criterion, opt = build(cfg): element i of what build returns
                        for i, te in enumerate(t.elts):
                            if isinstance(te, ast.Name):
                                part = ast.copy_location(ast.Subscript(
                                    n.value, ast.Constant(i), ast.Load()), n.value)
                                table.setdefault(te.id, []).append(part)
            elif isinstance(n, ast.AnnAssign) and n.value is not None and \
                    isinstance(n.target, ast.Name):
                table.setdefault(n.target.id, []).append(n.value)
            elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                table.setdefault(n.target.id, []).append(n.value)
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    if isinstance(item.optional_vars, ast.Name):
                        table.setdefault(item.optional_vars.id, []).append(item.context_expr)
        scope._tg_name_values = table  # type: ignore[attr-defined]
    return table.get(name, [])


def _loops_binding(scope: ast.AST, name: str) -> list[ast.For | ast.comprehension]:
    table = getattr(scope, "_tg_loop_targets", None)
    if table is None:
        table = {}
        for n in _local_nodes(scope):
            if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name):
                table.setdefault(n.target.id, []).append(n)
            elif isinstance(n, COMPREHENSIONS):
                for g in n.generators:
                    if isinstance(g.target, ast.Name):
                        table.setdefault(g.target.id, []).append(g)
        scope._tg_loop_targets = table  # type: ignore[attr-defined]
    return table.get(name, [])


def _appends(scope: ast.AST, name: str) -> list[ast.Call]:
    table = getattr(scope, "_tg_appends", None)
    if table is None:
        table = {}
        for n in _local_nodes(scope):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr == "append" and isinstance(n.func.value, ast.Name) and n.args:
                table.setdefault(n.func.value.id, []).append(n)
        scope._tg_appends = table  # type: ignore[attr-defined]
    return table.get(name, [])


def self_assigned(cls: ast.ClassDef, attr: str) -> list[ast.expr]:
    table = getattr(cls, "_tg_self_values", None)
    if table is None:
        table = {}
        for n in ast.walk(cls):
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and getattr(n, "value", None):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t, v in assigned_pairs(targets, n.value):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                            t.value.id == "self":
                        table.setdefault(t.attr, []).append(v)
        cls._tg_self_values = table  # type: ignore[attr-defined]
    return table.get(attr, [])


def _param(func: "Func", name: str) -> ast.arg | None:
    a = func.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
        if arg.arg == name:
            return arg
    return None


def parameter_default(func: "Func", arg: ast.arg) -> ast.expr | None:
    """The default value written for parameter ``arg`` of ``func``, or None."""
    a = func.args
    positional = [*a.posonlyargs, *a.args]
    if arg in positional:
        i = positional.index(arg) - (len(positional) - len(a.defaults))
        return a.defaults[i] if i >= 0 else None
    if arg in a.kwonlyargs:
        return a.kw_defaults[a.kwonlyargs.index(arg)]
    return None


def returned_values(func: "Func") -> list[ast.expr]:
    """The values ``func``'s own ``return`` statements give back."""
    return [r.value for r in _returns(func) if r.value is not None]


def _returns(func: "Func") -> list[ast.Return]:
    out = []
    stack = list(children(func))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return) and n.value is not None:
            out.append(n)
        if not isinstance(n, SCOPES):
            stack.extend(children(n))
    return out
