"""TG701 unsafe-torch-load: ``torch.load(..., weights_only=False)`` on a file from elsewhere.

``weights_only=False`` unpickles arbitrary objects, and unpickling can run code
(https://pytorch.org/docs/stable/generated/torch.load.html; CVE-2025-32434 covers even
``weights_only=True`` before torch 2.6). Since torch 2.6 ``weights_only=True`` is the default, so
a call without the argument stays silent; so does loading a path the same script saved with
``torch.save``, and a resume of the program's own format: every key read from the loaded dict
(``ckpt["model"]``) is a key of a dict the program saves (a literal, or what its
``build_checkpoint()`` returns).

The same path means the same binding, not the same text: a path read from a registry the
program fills (``self.index[name]`` with ``self.index[name] = path`` beside ``torch.save(obj,
path)``) is the paths stored there; a parameter is followed to what the
file's calls pass (``save_checkpoint(path)`` and ``load_checkpoint(path)`` called with one local
``path``), so ``save_pretrained(self, path)`` and ``from_pretrained(cls, path)`` are different
files. A load that visibly takes a file from outside (a download or URL feeds the path, or a
classmethod builds the model from it: ``from_pretrained``) is reported even when its keys match
the program's own format.

Fix (unsafe): ``weights_only=True`` refuses checkpoints that pickle whole modules or custom
classes; save ``state_dict()`` instead, or allow-list classes with
``torch.serialization.add_safe_globals``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import re

from trainguard.lint.astutil import dotted, is_false, kwarg, parent, walk_local
from trainguard.lint.branches import param_env
from trainguard.lint.callgraph import bind_arguments, parameter_default
from trainguard.lint.dataflow import last_assignment, scope_of
from trainguard.lint.file_origins import origins as _origins
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG701"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    saves = [c for c in script.calls
             if script.call_qualname(c) == "torch.save" and len(c.args) >= 2]
    saved: set[tuple[object, ...]] = set()
    for c in saves:
        saved |= _origins(script, c.args[1], 3)
    formats = [keys for c in saves if (keys := _dict_keys(script, c.args[0], 3))]
    payload = any(_runs_code_on_load(script, c.args[0]) for c in saves)
    for call, flag, arg in _unsafe_loads(script):
        path = ast.unparse(arg) if arg is not None else "the file"
        origins = _origins(script, arg, 4) if arg is not None else set()
        if origins and origins <= saved and not payload:
            continue  # a file this program writes (the same path, traced to its binding)
        elsewhere = payload or _from_elsewhere(script, call, origins)
        read = _keys_read(call)
        if not read and isinstance(parent(call), ast.Return):
            read = _keys_read_by_callers(script, call)
        if not elsewhere and read and any(read <= keys for keys in formats):
            continue  # a resume of the program's own checkpoint format
        given = kwarg(call, "weights_only")
        named = "" if given is None or is_false(given) else \
            f" ({ast.unparse(given)} is the False at {script.at(flag.lineno)})"
        yield Hit(call, f"{dotted(call.func)}({path}, weights_only=False){named} unpickles "
                        f"whatever the file holds: a checkpoint from elsewhere can run code",
                  fix="pass weights_only=True (the default from torch 2.6); save state_dict()s, "
                      "or allow-list classes with torch.serialization.add_safe_globals",
                  edits=[Edit(flag.lineno, flag.col_offset, flag.end_lineno or flag.lineno,
                              flag.end_col_offset or 0, "True")], safe=False)


def _unsafe_loads(script: Script) -> Iterator[tuple[ast.Call, ast.expr, ast.expr | None]]:
    """(call, its ``weights_only=False``, the path it loads) for each ``torch.load`` given the
    flag, and each call of a project function that forwards its ``**kwargs`` to a
    ``torch.load`` (``load_checkpoint(path, weights_only=False)``): the flag reaches the load."""
    for call in script.calls:
        flag = kwarg(call, "weights_only")
        if flag is not None and not is_false(flag) and \
                script.call_qualname(call) == "torch.load":
            flag = _false_parameter(script, call, flag)
        if flag is None or not is_false(flag):
            continue
        if script.call_qualname(call) == "torch.load":
            yield call, flag, call.args[0] if call.args else None
            continue
        for t in [t for t in script.targets(call) if not t.instance][:1]:
            args = t.func.args
            if args.kwarg is None or "weights_only" in [a.arg for a in args.kwonlyargs]:
                continue
            names = [a.arg for a in [*args.posonlyargs, *args.args]]
            names = names[1:] if t.bound and names[:1] in (["self"], ["cls"]) else names
            for load in walk_local(t.func):
                if isinstance(load, ast.Call) and \
                        t.script.call_qualname(load) == "torch.load" and \
                        kwarg(load, "weights_only") is None and any(
                            k.arg is None and dotted(k.value) == args.kwarg.arg
                            for k in load.keywords):
                    first = load.args[0] if load.args else None
                    param = _param_behind(first) if first is not None else None
                    yield call, flag, bind_arguments(names, call).get(param or "")
                    break


def _false_parameter(script: Script, load: ast.Call, flag: ast.expr) -> ast.expr | None:
    """``weights_only=safe_load`` in ``def load_torch_file(ckpt, safe_load=False)``: the
    ``False`` the parameter is bound to, when every call of the function in view leaves the
    default or passes ``False`` too (or, with no call in view, the default a caller from
    elsewhere gets). None when any call passes another value, or the function rebinds it."""
    func = script.enclosing_function(load)
    if not isinstance(flag, ast.Name) or func is None:
        return None
    arg = next((a for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
                if a.arg == flag.id), None)
    if arg is None or any(isinstance(n, ast.Name) and n.id == flag.id and
                          isinstance(n.ctx, ast.Store) for n in walk_local(func)):
        return None
    default = parameter_default(func, arg)
    if script.call_sites(func) or func.name == "__init__":
        bound = param_env(script, func).get(flag.id)
        return bound if bound is not None and is_false(bound) else None
    return default if default is not None and is_false(default) else None


def _param_behind(expr: ast.expr) -> str | None:
    """The parameter a load's path is: itself, or ``path = Path(path)`` of it."""
    while isinstance(expr, ast.Name):
        value = last_assignment(expr.id, expr)
        if value is None:
            return expr.id
        expr = value.args[0] if isinstance(value, ast.Call) and len(value.args) == 1 else value
    return None


def _runs_code_on_load(script: Script, obj: ast.AST) -> bool:
    """What ``torch.save`` writes holds an instance of a project class that defines
    ``__reduce__`` (or ``__reduce_ex__``/``__setstate__``): unpickling it calls what that
    returns, so no file holding it is safe to load with full pickle, whoever wrote it."""
    exprs = [obj, last_assignment(obj.id, obj)] if isinstance(obj, ast.Name) else [obj]
    for e in [e for e in exprs if e is not None]:
        for c in ast.walk(e):
            ref = script.graph.class_named(dotted(c.func)) if isinstance(c, ast.Call) else None
            if ref is not None and any(
                    isinstance(b, ast.FunctionDef) and
                    b.name in ("__reduce__", "__reduce_ex__", "__setstate__")
                    for b in ref.node.body):
                return True
    return False


_DOWNLOADS = re.compile(r"download|urlretrieve|urlopen|hf_hub|fetch|from_url|get_file",
                        re.I)


def _from_elsewhere(script: Script, load: ast.Call, origins: set[tuple[object, ...]]) -> bool:
    """The loaded file visibly comes from outside the program: a download or a URL feeds the
    path, or the load builds a model in a classmethod (``from_pretrained(cls, path)``), the
    entry point that hands a file from anywhere to the class."""
    for origin in origins:
        if origin[0] == "const" and str(origin[1]).strip("'\"").startswith(("http://",
                                                                           "https://")):
            return True
        if origin[0] == "text" and _DOWNLOADS.search(str(origin[1])):
            return True
    func = script.enclosing_function(load)
    if func is not None and any(dotted(d) == "classmethod" for d in func.decorator_list):
        first = func.args.args[0].arg if func.args.args else None
        for r in walk_local(func):
            if isinstance(r, ast.Call) and isinstance(r.func, ast.Name) and r.func.id == first:
                return True  # cls(...): a constructor from a checkpoint
    return False


def _dict_keys(script: Script, expr: ast.AST, depth: int) -> set[str]:
    """The string keys of the dict ``torch.save`` writes: a dict literal, a name assigned one,
    or what a function of the file returns (``torch.save(build_checkpoint(step), path)``)."""
    if depth <= 0:
        return set()
    if isinstance(expr, ast.Dict):
        return {k.value for k in expr.keys if isinstance(k, ast.Constant) and
                isinstance(k.value, str)}
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
            expr.func.id == "dict":
        return {k.arg for k in expr.keywords if k.arg}
    if isinstance(expr, ast.Name):
        value = last_assignment(expr.id, expr)
        return _dict_keys(script, value, depth - 1) if value is not None else set()
    if isinstance(expr, ast.Call):
        func = script.callee(expr)
        if func is not None:
            keys: set[str] = set()
            for r in walk_local(func):
                if isinstance(r, ast.Return) and r.value is not None:
                    keys |= _dict_keys(script, r.value, depth - 1)
            return keys
    return set()


def _keys_read_by_callers(script: Script, load: ast.Call) -> set[str]:
    """For ``return torch.load(...)`` in a helper (``def read_checkpoint(run_dir)``): the keys
    its callers read from what it returns (``state = read_checkpoint(d)``, ``state["model"]``);
    empty when a caller uses the result otherwise."""
    func = script.enclosing_function(load)
    sites = script.call_sites(func)[:8] if func is not None else []
    keys: set[str] = set()
    for site in sites:
        read = _keys_read(site)
        if not read:
            return set()
        keys |= read
    return keys


def _keys_read(load: ast.Call) -> set[str]:
    """The string keys read from what ``load`` (``torch.load``, or a call returning what it
    gave) returned (``ckpt["model"]``, ``ckpt.get("step")``) where it is assigned to a name."""
    p = parent(load)
    if not (isinstance(p, ast.Assign) and len(p.targets) == 1 and
            isinstance(p.targets[0], ast.Name)):
        return set()
    name = p.targets[0].id
    keys: set[str] = set()
    for n in walk_local(scope_of(load)):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                n.value.id == name and isinstance(n.slice, ast.Constant) and \
                isinstance(n.slice.value, str):
            keys.add(n.slice.value)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "get" and isinstance(n.func.value, ast.Name) and \
                n.func.value.id == name and n.args and isinstance(n.args[0], ast.Constant):
            keys.add(str(n.args[0].value))
    return keys
