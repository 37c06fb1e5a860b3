"""TG206 data-attribute: ``.data`` used to read or write a tensor.

``.data`` gives a tensor that autograd does not track: in-place changes through it are invisible
to the version counter, so backward can silently use wrong values
(https://pytorch.org/docs/stable/notes/autograd.html; the 0.4 migration guide asks for
``.detach()`` and ``torch.no_grad()`` instead). Fires only on tensors: parameters (loops over
``parameters()``), ``.weight``/``.bias``, model outputs, losses and ``torch`` factories. Silent on
``dataset.data`` and other non-tensors, under ``torch.no_grad()``, in ``__init__`` and
initialization functions, outside loops that run backward (initialization, e.g. loading
pretrained embeddings), and on ``.grad.data``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import parent, walk_local
from trainguard.lint.dataflow import is_loss_call, last_assignment
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG206"
_INIT_FUNC = re.compile(r"init|reset_parameters|_reset", re.I)
_TENSOR_ATTRS = {"weight", "bias", "running_mean", "running_var"}
_PARAM_ITER = re.compile(r"\.(named_)?parameters\(|\[['\"]params['\"]\]")
_FACTORIES = re.compile(r"^torch\.(tensor|randn|rand|zeros|ones|empty|full|arange|randint|"
                        r"nn\.Parameter|nn\.parameter\.Parameter)")


def check(script: Script) -> Iterator[Hit]:
    params = _parameter_names(script)
    backwarded = {c.func.value.id for c in script.calls  # type: ignore[attr-defined]
                  if is_backward(c) and isinstance(c.func.value, ast.Name)}  # type: ignore
    for node in script.nodes:
        if not (isinstance(node, ast.Attribute) and node.attr == "data"):
            continue
        recv = node.value
        if not _tensorish(script, recv, params, backwarded, node):
            continue
        func = script.enclosing_function(node)
        if func is not None and _INIT_FUNC.search(func.name):
            continue
        if script.grad_disabled(node) or not _in_backward_loop(script, node):
            continue
        write = _is_write(node)
        text = script.segment(recv) or "x"
        edits = []
        if not write:
            edits = [Edit(node.lineno, node.col_offset, node.end_lineno or node.lineno,
                          node.end_col_offset or 0, f"{text}.detach()")]
        yield Hit(node,
                  f"`{text}.data` {'writes to' if write else 'reads'} a tensor behind autograd's "
                  f"back" + (": the change is invisible to backward" if write else ""),
                  fix=("do the in-place update under `with torch.no_grad():` on the tensor itself"
                       if write else f"use {text}.detach()"),
                  edits=edits, safe=not write)


def _is_write(node: ast.Attribute) -> bool:
    p = parent(node)
    if isinstance(node.ctx, ast.Store):
        return True
    if isinstance(p, ast.Attribute) and p.attr.endswith("_") and not p.attr.startswith("_"):
        return True
    if isinstance(p, ast.Subscript) and isinstance(p.ctx, ast.Store):
        return True
    if isinstance(p, ast.AugAssign) and p.target is node:
        return True
    return False


def _tensorish(script: Script, recv: ast.AST, params: set[str], backwarded: set[str],
               at: ast.AST) -> bool:
    if isinstance(recv, ast.Attribute):
        if recv.attr == "grad":
            return False
        return recv.attr in _TENSOR_ATTRS
    if not isinstance(recv, ast.Name):
        return False
    if recv.id in params or recv.id in backwarded:
        return True
    value = last_assignment(recv.id, at)
    if value is None:
        return False
    if is_loss_call(script, value):
        return True
    if isinstance(value, ast.Call):
        k = script.key(value.func)
        if k and k != "self" and script.is_model(k):
            return True
        return bool(_FACTORIES.match(script.call_qualname(value) or ""))
    return False


def _parameter_names(script: Script) -> set[str]:
    """Loop variables over ``X.parameters()``, ``X.named_parameters()`` or ``group['params']``."""
    out: set[str] = set()
    for node in script.nodes:
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        if not _PARAM_ITER.search(ast.unparse(node.iter)):
            continue
        target = node.target
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]
        if isinstance(target, ast.Name):
            out.add(target.id)
    return out


def _in_backward_loop(script: Script, node: ast.AST) -> bool:
    """Inside a loop that runs backward, or a function such a loop calls: outside training,
    a ``.data`` write is initialization (loading pretrained embeddings) and is left alone."""
    inside = script.__dict__.get("_tg_backward_loop_nodes")
    if inside is None:
        inside = set()
        for loop in script.nodes:
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) and script.has_backward(loop):
                for n in script.reachable(loop):
                    inside.update(id(x) for x in walk_local(n))
        script.__dict__["_tg_backward_loop_nodes"] = inside
    return id(node) in inside
