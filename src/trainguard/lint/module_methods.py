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

__all__ = ["runs_layers"]

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


def _is_layer(script: Script, cls: ast.ClassDef, attr: str) -> bool:
    """``self.attr`` is set to a module in the class: a ``torch.nn`` layer or a module class
    of the file."""
    from trainguard.lint.callgraph import self_assigned

    for v in self_assigned(cls, attr):
        if not isinstance(v, ast.Call):
            continue
        q = script.call_qualname(v) or ""
        if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] not in _NOT_LAYERS and \
                not q.startswith("torch.nn.functional."):
            return True
        built = script.classes.get(dotted(v.func) or "")
        if built is not None and built is not cls and _is_module_class(script, built):
            return True
    return False
