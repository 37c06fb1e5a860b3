"""Where a finding happened: the first stack frame in the user's own code.

A frame is the user's when its file is outside torch, trainguard, the standard library's
``runpy``/``contextlib``, every installed package (``site-packages``/``dist-packages``) and the
interpreter's scripts folder (``bin/``: the ``trainguard``, ``torchrun`` or ``pytest`` console script
that started the process). The answer is cached per code object, so walking the stack costs a few
dict look-ups per frame.

The caches are keyed by ``id(code)``, not by the code object: a code object's hash is not cached
and covers its constants, which hold every nested function's code, so hashing a script's module
code (the frame of a training loop written at module level) walks the whole script, about 20 us for
a 700-line file, on every look-up. Each cache entry keeps its code object alive, so the id cannot be
reused by another object while the entry exists.
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
from types import CodeType, FrameType, MappingProxyType
from typing import Any, Iterator

from trainguard.sanitize.core.bounds import FRAMES

__all__ = ["Location", "user_frame", "user_frames", "user_location", "frame_location",
           "short_location", "is_user_file", "is_user_code", "is_trainguard_file", "read_path"]

Location = tuple[str, int, int]  # (path, 1-based line, 1-based column)

# the trainguard package (this file is trainguard/sanitize/core/frames.py)
_TRAINGUARD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_STDLIB = {os.path.abspath(p) for p in
           {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")} if p}
# console scripts (``bin/trainguard``, ``bin/torchrun``): the folders pip installs entry points into
_SCRIPTS = {os.path.abspath(p) for p in
            {sysconfig.get_paths().get("scripts", ""), os.path.dirname(sys.executable),
             os.path.join(sys.prefix, "bin"), os.path.join(sys.prefix, "Scripts")} if p}
_is_user_code: dict[int, bool] = {}  # id(code) -> the answer
_codes: dict[int, CodeType] = {}  # id(code) -> code: holds every code object a cache is keyed by
_positions: dict[int, list] = {}
_locations: dict[tuple[int, int], tuple[str, int, int]] = {}


def is_trainguard_file(filename: str) -> bool:
    """True for a file of trainguard itself."""
    return os.path.abspath(filename).startswith(_TRAINGUARD + os.sep)


def is_user_file(filename: str) -> bool:
    """True for a file the user wrote (a script, a test, their package in a source checkout)."""
    if not filename or filename.startswith("<"):
        # (IPython names a cell's code ``<ipython-input-N-HASH>``; ipykernel, a temporary .py)
        return filename.startswith(("<stdin", "<string", "<ipython-input-"))
    path = os.path.abspath(filename)
    if "site-packages" in path or "dist-packages" in path:
        return False
    if is_trainguard_file(path):
        return False
    if any(path.startswith(s + os.sep) for s in _STDLIB):
        return False
    if os.path.dirname(path) in _SCRIPTS:  # a console script's entry point
        return False
    parts = path.split(os.sep)
    return "torch" not in parts and "functorch" not in parts


def is_user_code(code: CodeType) -> bool:
    """:func:`is_user_file` for a code object, cached (the form to use on hot paths)."""
    known = _is_user_code.get(id(code))
    if known is None:
        _codes[id(code)] = code
        known = _is_user_code[id(code)] = is_user_file(code.co_filename)
    return known


def user_frame(start: FrameType | None = None) -> FrameType | None:
    """The innermost frame of user code at or above ``start`` (default: the caller); the walk ends
    with the stack. ``start=None`` means the caller, not "past the outermost frame": to walk on
    from a frame's ``f_back``, use :func:`user_frames`."""
    frame = start if start is not None else sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        known = _is_user_code.get(id(code))  # (a hot path: no call for a code seen before)
        if known or (known is None and is_user_code(code)):
            return frame
        frame = frame.f_back
    return None


def user_frames(start: FrameType | None, *, limit: int = FRAMES) -> Iterator[FrameType]:
    """The frames of user code from ``start`` outwards, innermost first, at most ``limit`` of them;
    none when ``start`` is None. The walk ends with the stack (the outermost frame's ``f_back`` is
    None)."""
    frame = start
    while frame is not None and limit > 0:
        if is_user_code(frame.f_code):
            yield frame
            limit -= 1
        frame = frame.f_back


def user_location(start: FrameType | None = None) -> Location | None:
    """``(path, line, col)`` of the innermost user frame, or None when the stack has none."""
    frame = start if start is not None else sys._getframe(1)
    # the common case on hot paths, a call made by the user's own code at a position seen before,
    # costs two look-ups and no call
    code = frame.f_code
    if _is_user_code.get(id(code), False):
        found = _locations.get((id(code), frame.f_lasti))
        if found is not None:
            return found
    else:
        frame = user_frame(frame)
        if frame is None:
            return None
    return frame_location(frame)


def frame_location(frame: FrameType) -> Location:
    """``(path, line, col)`` of the expression a frame is executing (column 1 when unknown);
    cached per (code object, instruction offset)."""
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    found = _locations.get(key)
    if found is None:
        _codes[id(code)] = code
        col = 1
        try:
            positions = _positions.get(id(code))
            if positions is None:
                positions = _positions[id(code)] = list(code.co_positions())
            pos = positions[frame.f_lasti // 2]
            if pos[0] == frame.f_lineno and pos[2] is not None:
                col = pos[2] + 1
        except (AttributeError, IndexError):
            pass
        found = _locations[key] = (code.co_filename, frame.f_lineno, col)
    return found


def short_location(where: Location | None, unknown: str = "an unknown line") -> str:
    """``file.py:line`` of a location for a finding's message (``unknown`` when there is none)."""
    return f"{os.path.basename(where[0])}:{where[1]}" if where else unknown


def names_hold_graph(names: tuple[str, ...], frame: Any) -> bool:
    """Whether one of ``names`` holds a tensor with a graph (a ``grad_fn``) in the first user
    frame from ``frame`` (``h1`` beside a target network's ``z2`` in ``byol_loss(h1, z2)``)."""
    user = next(iter(user_frames(frame)), None) if names else None
    local = user.f_locals if user is not None else {}
    return any(getattr(local.get(n), "grad_fn", None) is not None for n in names)


def read_path(frame: FrameType, node: ast.AST, *, global_names: bool = False) -> Any:
    """The object a path expression names in ``frame``, read without running user code, or None:
    a local name (with ``global_names``, else a global one); an attribute through the object's
    ``__dict__`` (a class's namespace too), then a module's ``_modules``
    (``self.model.encoder``); a dict's entry at a constant key (``self.meters["loss"]``, by
    ``dict.get``: no ``__missing__`` runs, nothing is created). Properties, ``__getattr__`` and
    other subscripts give None."""
    if isinstance(node, ast.Name):
        if node.id in frame.f_locals or not global_names:
            return frame.f_locals.get(node.id)
        return frame.f_globals.get(node.id)
    if isinstance(node, ast.Subscript):
        value = read_path(frame, node.value, global_names=global_names)
        return dict.get(value, node.slice.value) if isinstance(value, dict) \
            and isinstance(node.slice, ast.Constant) else None
    if not isinstance(node, ast.Attribute):
        return None
    attrs = getattr(read_path(frame, node.value, global_names=global_names), "__dict__", None)
    if not isinstance(attrs, (dict, MappingProxyType)):
        return None
    if node.attr in attrs:
        return attrs[node.attr]
    modules = attrs.get("_modules")
    return modules.get(node.attr) if isinstance(modules, dict) else None
