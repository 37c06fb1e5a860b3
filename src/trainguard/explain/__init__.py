"""Instruments: explain a tensor or module, draw a backward graph, check gradients.

``explain`` and ``record`` are importable from here; :func:`trainguard.explain` is the same
function as ``trainguard.explain.explain``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from trainguard.explain.explain import TensorReport, Unreached, explain
from trainguard.explain.modes import ModuleReport
from trainguard.explain.record import Cut, Recording, record

__all__ = ["explain", "record", "Cut", "Recording", "TensorReport", "ModuleReport", "Unreached"]


class _CallableModule(types.ModuleType):
    """Lets ``trainguard.explain(...)`` work even where the name resolves to this package (after
    ``import trainguard.explain.record``, Python binds the package, not the function)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return explain(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
