"""TG701 unsafe-torch-load: ``torch.load(..., weights_only=False)`` on a file from elsewhere.

``weights_only=False`` unpickles arbitrary objects, and unpickling can run code
(https://pytorch.org/docs/stable/generated/torch.load.html; CVE-2025-32434 covers even
``weights_only=True`` before torch 2.6). Since torch 2.6 ``weights_only=True`` is the default, so
a call without the argument stays silent; so does loading a path the same script saved with
``torch.save``, and a resume of the program's own format: every key read from the loaded dict
(``ckpt["model"]``) is a key of a dict the program saves (a literal, or what its
``build_checkpoint()`` returns).

Fix (unsafe): ``weights_only=True`` refuses checkpoints that pickle whole modules or custom
classes; save ``state_dict()`` instead, or allow-list classes with
``torch.serialization.add_safe_globals``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_false, kwarg, parent, walk_local
from trainguard.lint.dataflow import last_assignment, scope_of
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG701"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    saves = [c for c in script.calls
             if script.call_qualname(c) == "torch.save" and len(c.args) >= 2]
    saved = {ast.unparse(c.args[1]) for c in saves}
    formats = [keys for c in saves if (keys := _dict_keys(script, c.args[0], 3))]
    for call in script.calls:
        if script.call_qualname(call) != "torch.load":
            continue
        flag = kwarg(call, "weights_only")
        if not is_false(flag):
            continue
        path = ast.unparse(call.args[0]) if call.args else "the file"
        if path in saved:
            continue
        read = _keys_read(call)
        if read and any(read <= keys for keys in formats):
            continue  # a resume of the program's own checkpoint format
        assert flag is not None
        yield Hit(call, f"torch.load({path}, weights_only=False) unpickles whatever the file "
                        f"holds: a checkpoint from elsewhere can run code",
                  fix="pass weights_only=True (the default from torch 2.6); save state_dict()s, "
                      "or allow-list classes with torch.serialization.add_safe_globals",
                  edits=[Edit(flag.lineno, flag.col_offset, flag.end_lineno or flag.lineno,
                              flag.end_col_offset or 0, "True")], safe=False)


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


def _keys_read(load: ast.Call) -> set[str]:
    """The string keys read from what ``torch.load`` returned (``ckpt["model"]``,
    ``ckpt.get("step")``) where it is assigned to a name."""
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
