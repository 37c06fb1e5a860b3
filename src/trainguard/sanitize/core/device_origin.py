"""Where the CPU tensors that a failing model call was given were made: the tensor factory without
``device=`` in the user's source that bound them.

A model moved to an accelerator and called with a tensor that sits on the CPU fails inside its
``forward``, far from the line to change: ``mask = torch.ones(b, h, w)`` in the helper that pads
the batch, ``self.cache = torch.zeros(batch, n, d)`` in a streaming decoder's ``reset()``. The
argument of the failing call is followed back one binding through the user's source: a name's
last assignment in the calling function, a ``self.<attr>`` stored by a method of the caller's
object's class, or the ``return`` of a user function called in the argument (the names it
returns, or packs into an object, bound in that function). Only a factory given no device counts
(it makes CPU tensors while no default device is set), and only for CPU tensors given to a model
whose parameters all sit on one other device, beside inputs the user put on that device (the
images moved, the mask made on the host); a call whose inputs are all on the CPU left the whole
batch behind, and the call is the line to change.

Bounded: the root call's arguments, 16 attributes or items of each; one caller frame; the source
of at most the caller's function, one class and one called function.
"""

from __future__ import annotations

import ast
from itertools import islice
from types import FunctionType, ModuleType
from typing import Any

from trainguard.sanitize.core.cuts import self_stores
from trainguard.sanitize.core.factories import factories
from trainguard.sanitize.core.frames import frame_location, is_trainguard_file, is_user_code
from trainguard.sanitize.core.source import SourceFile, function_node, last_assigned

__all__ = ["host_factory", "method_owner", "op_factory"]

_WIDTH = 16  # attributes or items of one argument looked at


def host_factory(exc: BaseException, root: Any) -> tuple[Any, str, str, Any] | None:
    """``(location, call text, what, where)`` of the factory without ``device=`` that made the
    CPU tensor given to the outermost failing call of ``root`` (at ``where``), a model whose
    parameters sit on one device that is not the CPU and that was given tensors on that device
    too (``what``: ``"input 1"``, ``"input 0.mask"``); None when the argument is not followed to
    one such factory."""
    import torch

    devices = {p.device.type for p in islice(root.parameters(), 64)} if root is not None else ()
    default = getattr(torch, "get_default_device", lambda: torch.device("cpu"))()
    if len(devices) != 1 or "cpu" in devices or default.type != "cpu":
        return None
    impl = (torch.nn.Module._call_impl.__code__, torch.nn.Module._wrapped_call_impl.__code__)
    tb, call_frame = exc.__traceback__, None
    while tb is not None and call_frame is None:
        if tb.tb_frame.f_code in impl and tb.tb_frame.f_locals.get("self") is root:
            call_frame = tb.tb_frame
        tb = tb.tb_next
    caller = call_frame.f_back if call_frame is not None else None
    while caller is not None and is_trainguard_file(caller.f_code.co_filename):
        caller = caller.f_back  # (the sanitizer's own wrapper of the call)
    if caller is None or not is_user_code(caller.f_code):
        return None  # called by a library (a trainer, a wrapper): its call is not the user's
    where = frame_location(caller)
    file = SourceFile.load(where[0])
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    if call is None or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    given = {str(i): a for i, a in enumerate(call_frame.f_locals.get("args", ()))}
    given.update(dict(call_frame.f_locals.get("kwargs", {})))
    if not any(_held_on(v, next(iter(devices))) is not None for v in given.values()):
        return None  # nothing was moved to the model's device: the batch was not moved at all
    nodes = {str(i): a for i, a in enumerate(call.args)} | {k.arg: k.value for k in call.keywords}
    for key, value in given.items():
        held = _held_on(value, "cpu")
        if held is not None and key in nodes:
            found = _origin(nodes[key], caller, file, call.lineno, held)
            if found is not None:
                # ``input 1``, ``input 0.mask``, ``input 0[1]``, ``cache=``
                what = (f"input {key}" if key.isdigit() else f"{key}=") + held
                return found[0], found[1], what, where
    return None


def op_factory(exc: BaseException) -> tuple[Any, str, str] | None:
    """``(location, call text, name)`` of the factory without ``device=`` that made a CPU tensor
    named in the user's failing line outside any ``forward`` (``(ce * mask).mean()`` in a
    training step, ``mask`` unpacked from a helper's ``return mask_ori, pseudo``) while another
    name of that line holds a tensor or model on a device that is not the CPU. None when the
    line runs in a module's ``forward``, names no such pair, or not exactly one such name is
    followed to a factory."""
    import torch

    default = getattr(torch, "get_default_device", lambda: torch.device("cpu"))()
    frame, line, tb = None, 0, exc.__traceback__
    while tb is not None:
        if is_user_code(tb.tb_frame.f_code):
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    body = function_node(frame.f_code) if frame is not None else None
    file = SourceFile.load(frame.f_code.co_filename) if body is not None else None
    if file is None or default.type != "cpu" or \
            isinstance(frame.f_locals.get("self"), torch.nn.Module):
        return None
    names = {n.id: n for n in ast.walk(_statement(body, line))
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    values = {k: frame.f_locals.get(k, frame.f_globals.get(k)) for k in names}
    if not any(_off_cpu(v) for v in values.values()):
        return None
    found = [(made, k) for k, v in values.items() if _held_on(v, "cpu") == ""
             and (made := _origin(names[k], frame, file, line, "")) is not None]
    return (*found[0][0], found[0][1]) if len(found) == 1 else None


def _off_cpu(value: Any) -> bool:
    """Whether a tensor, or a model's first parameter, sits on a device that is not the CPU."""
    import torch

    if isinstance(value, torch.nn.Module):
        value = next(value.parameters(), None)
    return isinstance(value, torch.Tensor) and value.device.type != "cpu"


def _statement(body: ast.AST, line: int) -> ast.AST:
    """The innermost simple statement of ``body`` that holds ``line`` (``body`` when none)."""
    best = body
    for node in ast.walk(body):
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            best = node
    return best


def _held_on(value: Any, device: str) -> str | None:
    """``""`` for a tensor on ``device`` (a CPU one not 0-dim), where a plain object, tuple, list
    or dict holds one (``".mask"``, ``"[1]"``, ``"['mask']"``); None for none."""
    import torch

    def on(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == device \
            and (t.dim() > 0 or device != "cpu") and not isinstance(t, torch.nn.Parameter)

    if on(value):
        return ""
    if isinstance(value, (tuple, list)):
        items = [(f"[{i}]", v) for i, v in enumerate(value[:_WIDTH])]
    elif isinstance(value, dict):
        items = [(f"[{k!r}]", v) for k, v in islice(value.items(), _WIDTH)]
    else:
        items = [(f".{k}", v) for k, v in islice(getattr(value, "__dict__", {}).items(), _WIDTH)]
    return next((k for k, v in items if on(v)), None)


def _origin(node: ast.AST, frame: Any, file: SourceFile, line: int, held: str
            ) -> tuple[Any, str] | None:
    """The factory without a device that made the value of ``node`` (an argument of the call at
    ``line`` in ``frame``): itself, a name's last assignment, a ``self.<attr>`` store of the
    object's class, or what a user function called there returns."""
    path = frame.f_code.co_filename
    if _bare(node):
        return _at(path, node)
    if isinstance(node, ast.Name):
        value, index = _bound(file.scope(node), node.id, line)
        if value is not None and index is None and _bare(value):
            return _at(path, value)
        return _returned(value, frame, held, index) if value is not None else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        owner = frame.f_locals.get(node.value.id, frame.f_globals.get(node.value.id))
        stores = [(f.__code__.co_filename, v) for f, _, v in self_stores(type(owner), node.attr)
                  if isinstance(f, FunctionType) and is_user_code(f.__code__)]
        made = [_at(p, v) for p, v in stores if _bare(v)]
        if any(isinstance(v, ast.Name) for _, v in stores):
            return None  # (also a value handed in: ``self.cache = cache``)
        return made[0] if len(made) == 1 else None
    return _returned(node, frame, held)


def _bound(scope: ast.AST, name: str, line: int) -> tuple[ast.AST | None, int | None]:
    """The value of the last assignment to ``name`` in ``scope`` before the statement at
    ``line`` (that one binds its names after it runs), and ``name``'s position when it is
    unpacked from that value (``mask, pseudo = helper(...)``: 0), else None."""
    found: tuple[Any, int | None] | None = None
    for node in ast.walk(scope):
        if not isinstance(node, ast.Assign) or (node.end_lineno or node.lineno) >= line or \
                found is not None and node.lineno < found[0].lineno:
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == name:
                found = (node, None)
            elif isinstance(target, (ast.Tuple, ast.List)) and \
                    not any(isinstance(e, ast.Starred) for e in target.elts):
                index = next((i for i, e in enumerate(target.elts)
                              if isinstance(e, ast.Name) and e.id == name), None)
                found = (node, index) if index is not None else found
    return (found[0].value, found[1]) if found is not None else (None, None)


def _returned(call: ast.AST, frame: Any, held: str, index: int | None = None
              ) -> tuple[Any, str] | None:
    """For ``call`` of a user function (a name of the caller's frame, a function of a module or
    a method of an object it holds: ``data.pack(...)``, ``self.pack(...)``), the one factory
    without a device among what it returns: the returned value, or the names it packs
    (``Batch(x, mask)``, ``return x, mask``) last bound so before the ``return``; a name equal
    to the attribute that holds the CPU tensor wins a tie. With ``index``, the caller unpacks
    the result and the tensor is that item of each returned tuple (``return mask_ori, pseudo``)."""
    func = call.func if isinstance(call, ast.Call) else None
    base = func.value if isinstance(func, ast.Attribute) else func  # (``self.pack(...)``)
    if not isinstance(base, ast.Name):
        return None
    function = frame.f_locals.get(base.id, frame.f_globals.get(base.id))
    if base is not func:  # (a class attribute: no property is run)
        owner = function if isinstance(function, ModuleType) else type(function)
        function = getattr(owner, func.attr, None)
    code = getattr(function, "__code__", None)
    node = function_node(code) if code is not None and is_user_code(code) else None
    if node is None:
        return None
    found: dict[str, Any] = {}
    for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None):
        value = ret.value
        if index is not None:  # (the item unpacked by the caller, when the tuple is written)
            if not isinstance(value, ast.Tuple) or len(value.elts) <= index:
                continue
            value = value.elts[index]
        if _bare(value):
            found[""] = _at(code.co_filename, value)
        for name in (n for n in ast.walk(value) if isinstance(n, ast.Name)):
            value = last_assigned(node, name.id, ret.lineno, (ast.expr,))
            if value is not None and _bare(value):
                found[name.id] = _at(code.co_filename, value)
    name = held.strip(".[]'\"")  # (the attribute or key that holds the CPU tensor)
    if len(found) > 1 and name in found:
        return found[name]
    return next(iter(found.values())) if len(found) == 1 else None


def _bare(node: ast.AST) -> bool:
    """A ``torch.<factory>(...)`` call given no device and not moved (``.to(...)``), also under
    casts (``torch.ones(...).bool()``)."""
    base = node
    while isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) \
            and isinstance(base.func.value, ast.Call):
        base = base.func.value
    return isinstance(base, ast.Call) and any(c is base for c in factories(node))


def _at(path: str, call: ast.AST) -> tuple[Any, str]:
    base = call
    while isinstance(base.func.value, ast.Call):  # (the factory under the casts)
        base = base.func.value
    return (path, call.lineno, call.col_offset + 1), ast.unparse(base.func) + "(...)"


def method_owner(exc: BaseException, models: list[Any]) -> tuple[Any, set[str]] | None:
    """``(module, devices)``: the module whose method runs in the innermost user frame of the
    traceback that has a module as ``self`` (a helper called by hand,
    ``self.schedule.q_sample(x, t)``, runs in no module call), and the devices of the parameters
    and buffers of a model that holds it (in ``models`` or named in a frame of the traceback):
    where ``.to()`` put the model. None when no such frame or no holding model has any."""
    from torch import nn

    owner, seen = None, list(models)
    tb = exc.__traceback__
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
        if not is_user_code(frame.f_code):
            continue
        held = [v for v in islice(frame.f_locals.values(), 64) if isinstance(v, nn.Module)]
        seen += held  # (``model`` in the loop's frame: a root no call was seen of)
        if isinstance(frame.f_locals.get("self"), nn.Module):
            owner = frame.f_locals["self"]
    if owner is None:
        return None
    for model in seen:
        if any(sub is owner for sub in islice(model.modules(), 256)):
            held = list(islice(model.parameters(), 64)) + list(islice(model.buffers(), 64))
            if held:
                return owner, {str(t.device) for t in held}
    return None
