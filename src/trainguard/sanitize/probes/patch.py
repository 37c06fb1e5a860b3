"""Wrapping a PyTorch attribute so that it can be put back: :func:`patch` and :data:`Undo`."""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["Undo", "patch", "compiling_flags"]

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
