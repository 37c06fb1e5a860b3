"""Instruments: explain a tensor or module, draw a backward graph, check gradients.

Names load on first use so that ``trainguard graph --help`` does not import torch.
``trainguard.explain`` is both this package and, when called, :func:`trainguard.explain.explainer.explain`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAMES = {
    "explain": "trainguard.explain.explainer",
    "TensorReport": "trainguard.explain.explainer",
    "Unreached": "trainguard.explain.explainer",
    "ModuleReport": "trainguard.explain.modes",
    "record": "trainguard.explain.recording",
    "Cut": "trainguard.explain.recording",
    "Recording": "trainguard.explain.recording",
}

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'trainguard.explain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


class _CallableModule(types.ModuleType):
    """Lets ``trainguard.explain(...)`` work even where the name resolves to this package (after
    ``import trainguard.explain.graph``, Python binds the package, not the function)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from trainguard.explain.explainer import explain

        return explain(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
