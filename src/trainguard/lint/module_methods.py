"""Methods of a model class other than ``forward`` that run the model's layers.

``model.embed(x)``, ``vae.encode(x)``, ``net.features(x)``: a method of an ``nn.Module``
subclass of the file that calls its own submodules (``self.stem(x)``, ``self.encoder.forward(h)``,
``self(x)``, or another method of the class that does) runs a forward pass as much as
``model(x)`` does: it records a graph when grad is enabled, and its dropout and batch norm
follow the module's mode. A method that only reads or sets state (``init_weights``,
``freeze``) is none; a method of a class the file does not hold is not known, and is none.
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import dotted
from trainguard.lint.script import Script

__all__ = ["runs_layers", "submodule_call"]

_NOT_LAYERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict"}


def runs_layers(script: Script, call: ast.Call) -> bool:
    """``call`` is ``obj.method(...)`` with ``method`` a method of a module class of the file
    (not ``forward``) that runs the module's layers."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr in ("forward", "__call__"):
        return False
    method = next((t.func for t in script.targets(call)[:2]
                   if t.script is script and not t.instance), None)
    cls = script.enclosing_class(method) if method is not None else None
    if cls is None or method.name.startswith("__") or not _is_module_class(script, cls):
        return False
    return _runs_layers(script, cls, method, 2)


def _is_module_class(script: Script, cls: ast.ClassDef) -> bool:
    return any((script.qualname(b) or "").endswith("nn.Module") or
               (dotted(b) in script.classes and dotted(b) != cls.name and
                _is_module_class(script, script.classes[dotted(b)]))  # type: ignore[index]
               for b in cls.bases)


def _runs_layers(script: Script, cls: ast.ClassDef, method: ast.AST, depth: int) -> bool:
    for n in ast.walk(method):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id == "self":
            return True  # self(x)
        if isinstance(f, ast.Attribute) and f.attr == "forward":
            f = f.value
            if isinstance(f, ast.Name) and f.id == "self":
                return True  # self.forward(x)
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and
                f.value.id == "self"):
            continue
        if f.attr == "forward" or _is_layer(script, cls, f.attr):
            return True
        other = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and
                      b.name == f.attr), None)
        if other is not None and other is not method and depth > 0 and \
                _runs_layers(script, cls, other, depth - 1):
            return True
    return False


def submodule_call(script: Script, call: ast.Call) -> bool:
    """``call`` is ``obj.attr(...)`` with ``obj`` a model (not ``self``) whose class, a module
    class of the project, sets ``self.attr`` to a module (``vae.decoder(z)``): the submodule
    runs in the mode ``obj.train()``/``obj.eval()`` gave it, like ``obj(x)`` does."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr in ("forward", "__call__"):
        return False
    key = script.key(f.value)
    if key in (None, "self") or not script.is_model(key):
        return False
    types = script.graph.types(f.value)
    return bool(types) and all(isinstance(t.node, ast.ClassDef) and
                               _is_module_class(t.script, t.node) and
                               _is_layer(t.script, t.node, f.attr) for t in types)


def _is_layer(script: Script, cls: ast.ClassDef, attr: str) -> bool:
    """``self.attr`` is set to a module in the class: a ``torch.nn`` layer, a module class
    of the file, or what a function of the file returns that builds one
    (``self.decoder = mlp(sizes)`` returning an ``nn.Sequential``)."""
    from trainguard.lint.callgraph import self_assigned

    return any(_builds_layer(script, cls, v, 1) for v in self_assigned(cls, attr))


def _builds_layer(script: Script, cls: ast.ClassDef, v: ast.expr, depth: int) -> bool:
    from trainguard.lint.callgraph import returned_values

    if isinstance(v, ast.Call):
        factory = script.callee(v) if depth > 0 and isinstance(v.func, ast.Name) else None
        if factory is not None and script.enclosing_class(factory) is None:
            return any(_builds_layer(script, cls, r, depth - 1)
                       for r in returned_values(factory))
        q = script.call_qualname(v) or ""
        if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] not in _NOT_LAYERS and \
                not q.startswith("torch.nn.functional."):
            return True
        built = script.classes.get(dotted(v.func) or "")
        if built is not None and built is not cls and _is_module_class(script, built):
            return True
    return False
