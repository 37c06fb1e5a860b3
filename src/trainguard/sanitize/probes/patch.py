"""Wrapping a PyTorch attribute so that it can be put back: :func:`patch` and :data:`Undo`."""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["Undo", "patch", "compiling_flags", "transform_level"]

Undo = Callable[[], None]
"""An action that removes one wrapper or hook; called once, when the watcher stops."""


def patch(owner: Any, name: str, make: Callable[[Any], Any], undo: list[Undo]) -> None:
    """Replace ``owner.name`` by ``make(original)`` (with the original's name and docstring) and
    append the action that puts the original back to ``undo``."""
    original = getattr(owner, name)
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    setattr(owner, name, wrapper)
    undo.append(lambda: setattr(owner, name, original))


class _CompilingFlag:
    """``_is_compiling_flag`` read through ``torch.compiler.is_compiling()`` (for a torch without
    the module attribute)."""

    @property
    def _is_compiling_flag(self) -> bool:
        import torch

        return torch.compiler.is_compiling()


def compiling_flags() -> Any:
    """An object whose ``_is_compiling_flag`` attribute answers ``torch.compiler.is_compiling()``
    outside Dynamo's tracing: torch.compiler itself where it keeps that module attribute (read
    without a call on hot paths), else a stand-in that calls the function."""
    import torch

    if isinstance(getattr(torch.compiler, "_is_compiling_flag", None), bool):
        return torch.compiler
    return _CompilingFlag()


def _no_transform() -> None:
    return None


def transform_level() -> Any:
    """A function answering, without arguments, whether a ``torch.func`` transform (``vmap``,
    ``grad``, ``jvp``, ``functionalize``) is running: its interpreter, else None. Inside one,
    tensors are wrappers whose values cannot be read (``.item()`` raises "vmap: It looks like
    you're calling .item() on a Tensor"), and the code is a function of the transform, not a
    training step: the probes hand such calls straight to PyTorch. ``torch._C._functorch``'s
    ``peek_interpreter_stack``, where this torch has it."""
    import torch

    functorch = getattr(torch._C, "_functorch", None)
    return getattr(functorch, "peek_interpreter_stack", None) or _no_transform
