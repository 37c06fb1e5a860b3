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
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.dataflow import last_assignment, scope_of
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
        yield Hit(call, f"{dotted(call.func)}({path}, weights_only=False) unpickles whatever the "
                        f"file holds: a checkpoint from elsewhere can run code",
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


def _origins(script: Script, expr: ast.AST, depth: int) -> set[tuple[object, ...]]:
    """Where a path's value comes from, as comparable keys: a parameter is followed to the
    arguments its function's calls in the file pass (a parameter nobody here passes stays
    itself: ``("param", function, name)``), a local name to its assignment (the same binding
    written and read is the same file), a literal to its text; anything else is its text."""
    if depth <= 0:
        return {("text", ast.unparse(expr))}
    returned = _returned(script, expr)
    if returned:  # store.offload(x): the paths that function of the file returns
        out: set[tuple[object, ...]] = set()
        for r in returned:
            out |= _origins(script, r, depth - 1)
        return out
    if isinstance(expr, ast.Name):
        func = script.enclosing_function(expr)
        value = last_assignment(expr.id, expr)
        if value is not None:
            if isinstance(value, (ast.Name, ast.Constant)):
                return _origins(script, value, depth - 1)
            if isinstance(value, ast.Call) and _returned(script, value):
                return _origins(script, value, depth - 1)
            return {("text", ast.unparse(value))}
        listed = _iterated_from(script, expr)
        if listed:  # for name in files: the values the program put in that list
            out = set()
            for v in listed:
                out |= _origins(script, v, depth - 1)
            return out
        params = [] if func is None else [a.arg for a in [
            *func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
        if func is not None and expr.id in params:
            names = params
            cls = script.enclosing_class(func)
            if cls is not None and names and not any(
                    dotted(d) == "staticmethod" for d in func.decorator_list):
                names = names[1:]
            out = set()
            for site in script.call_sites(func)[:8]:
                bound = bind_arguments(names, site)
                if expr.id not in bound:
                    return {("param", id(func), expr.id)}
                out |= _origins(script, bound[expr.id], depth - 1)
            return out or {("param", id(func), expr.id)}
    if isinstance(expr, ast.Constant):
        return {("const", repr(expr.value))}
    if isinstance(expr, ast.Subscript) and (holder := dotted(expr.value)):
        # self.index[name]: the paths the program stored in that registry
        # (``self.index[name] = path`` beside the ``torch.save(obj, path)``)
        stored = [n.value for n in script.nodes if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Subscript) and dotted(t.value) == holder for t in n.targets)]
        if stored:
            out = set()
            for value in stored[:8]:
                out |= _origins(script, value, depth - 1)
            return out
    return {("text", ast.unparse(expr))}


def _iterated_from(script: Script, name: ast.Name) -> list[ast.expr]:
    """For a loop variable ``name`` of ``for name in files`` (``files`` a plain name): the values
    the file appends to ``files`` (``files.append(cache.put(...))``) or lists in its literal;
    empty otherwise."""
    loop = parent(name)
    while loop is not None and not isinstance(loop, (ast.For, ast.comprehension)):
        if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return []
        loop = parent(loop)
    for n in script.nodes:
        if isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) and \
                n.target.id == name.id and isinstance(n.iter, ast.Name) and \
                n.lineno <= name.lineno:  # type: ignore[attr-defined]
            held = n.iter.id
            values = [c.args[0] for c in script.calls if isinstance(c.func, ast.Attribute)
                      and c.func.attr == "append" and dotted(c.func.value) == held and c.args]
            values += [e for a in script.nodes if isinstance(a, ast.Assign)
                       and isinstance(a.value, ast.List) and any(
                           isinstance(t, ast.Name) and t.id == held for t in a.targets)
                       for e in a.value.elts]
            return values[:8]
    return []


def _returned(script: Script, value: ast.AST) -> list[ast.expr]:
    """The values a function of this file that writes with ``torch.save`` returns, when
    ``value`` calls one (one target, every ``return`` giving a value): ``path`` of
    ``torch.save(record, path); return path``. A function that saves nothing (a download
    helper) is judged by its call's text."""
    if not isinstance(value, ast.Call):
        return []
    targets = [t for t in script.targets(value) if not t.instance]
    if len(targets) != 1 or targets[0].script is not script:
        return []
    body = list(walk_local(targets[0].func))
    if not any(isinstance(c, ast.Call) and script.call_qualname(c) == "torch.save" for c in body):
        return []
    returns = [r for r in body if isinstance(r, ast.Return)]
    if not returns or any(r.value is None for r in returns):
        return []
    return [r.value for r in returns[:4] if r.value is not None]


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
