"""Where a classifier's number of outputs was set, when its dataset declares more classes.

Used by TG402 at PyTorch's "Target K is out of bounds". Labels above the model's C scores are the
model's fault, not the labels', when the dataset itself says how many classes it has: a
``classes`` list (torchvision's convention: ``ImageFolder``, ``CIFAR10``, ``MNIST``; labels are
indices into it) longer than C, with every label inside it. That dataset is found through a
``DataLoader`` held by a local of the loss call's frames (through ``Subset``/``random_split``).

The line that set C is then searched from the same frames outwards: a local holding an
``nn.Module`` whose last layer with ``out_features``/``out_channels`` gives C scores; the
statements above the frame's line that built it (``model = make_cnn(num_classes)``) or replaced
its head (``model.fc = nn.Linear(num_ftrs, 2)``), the last one first, that pass C as an argument
(a constant, a name or ``len(name)`` whose value in the frame is C). A constant answers with that
statement; a name with its last assignment above it (``num_classes = len(CLASS_NAMES)``). None
when no such argument is found (C set inside the model's class: the loss line stays).

Cost: at PyTorch's error only, a walk over a few frames' locals and one parse (cached).
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

from trainguard.sanitize.core.frames import Location, read_path, user_frames
from trainguard.sanitize.core.source import function_node
from trainguard.sanitize.core.target_origin import last_binding

__all__ = ["declared_classes", "head_set_at"]

_FRAMES = 6  # user frames searched outwards from the loss call


def declared_classes(frame: FrameType | None) -> int | None:
    """The number of classes the dataset of a ``DataLoader`` local to ``frame`` or its callers
    declares (``len(dataset.classes)``), when exactly one such number is found; else None."""
    try:
        from torch.utils.data import DataLoader, Subset

        found = set()
        for outer in user_frames(frame, limit=_FRAMES):
            for value in list(outer.f_locals.values()):
                if isinstance(value, DataLoader):
                    dataset = value.dataset
                    while isinstance(dataset, Subset):
                        dataset = dataset.dataset
                    classes = getattr(dataset, "__dict__", {}).get("classes")
                    if isinstance(classes, (list, tuple, dict)) and classes:
                        found.add(len(classes))
        return found.pop() if len(found) == 1 else None
    except Exception:  # a locating aid: never in the way of the finding
        return None


def head_set_at(frame: FrameType | None, scores: int) -> Location | None:
    """The line that gave the model ``scores`` outputs (see the module doc), or None."""
    try:
        for outer in user_frames(frame, limit=_FRAMES):
            for name, value in list(outer.f_locals.items()):
                if _head(value) == scores:
                    found = _set_in(outer, name, scores)
                    if found is not None:
                        return found
    except Exception:  # a locating aid: never in the way of the finding
        return None
    return None


def _head(value: Any) -> int | None:
    """The output width of the last layer of module ``value`` that has one, else None."""
    import torch

    if not isinstance(value, torch.nn.Module):
        return None
    width = None
    for module in value.modules():
        size = getattr(module, "out_features", None) or getattr(module, "out_channels", None)
        if isinstance(size, int):
            width = size
    return width


def _set_in(frame: FrameType, name: str, scores: int) -> Location | None:
    """In ``frame``'s function: the statement building ``name`` or replacing one of its
    attributes, the last one first, that passes ``scores``; the answer its argument leads to."""
    function = function_node(frame.f_code)
    if function is None:
        return None
    line = frame.f_lineno
    made = [n for n in ast.walk(function) if isinstance(n, ast.Assign) and n.lineno < line
            and isinstance(n.value, ast.Call) and len(n.targets) == 1
            and _names(n.targets[0], name)]
    for stmt in sorted(made, key=lambda n: n.lineno, reverse=True):
        call = stmt.value
        given = [a for a in [*call.args, *(k.value for k in call.keywords)]
                 if _value(a, frame) == scores]
        if len(given) != 1:
            continue
        arg, path = given[0], frame.f_code.co_filename
        assigned = last_binding(function, arg.id, stmt.lineno) \
            if isinstance(arg, ast.Name) else None
        at = assigned if assigned is not None else stmt
        return (path, at.lineno, at.col_offset + 1)
    return None


def _names(target: ast.AST, name: str) -> bool:
    """Whether ``target`` is ``name`` or ``name.attr`` (a replaced head)."""
    if isinstance(target, ast.Attribute):
        target = target.value
    return isinstance(target, ast.Name) and target.id == name


def _value(arg: ast.AST, frame: FrameType) -> Any:
    """The value of a constant, a name or attribute chain, or ``len(name)`` in ``frame``; None
    for anything else (nothing is called but ``len`` of a list, tuple or dict)."""
    if isinstance(arg, ast.Constant):
        return arg.value if isinstance(arg.value, int) else None
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "len" \
            and len(arg.args) == 1:
        held = read_path(frame, arg.args[0], global_names=True)
        return len(held) if isinstance(held, (list, tuple, dict)) else None
    value = read_path(frame, arg, global_names=True)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
