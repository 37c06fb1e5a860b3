"""Which submodules of a model behave differently in training and evaluation mode.

Dropout with ``p > 0`` drops activations only in training mode; BatchNorm with
``track_running_stats=True`` normalises with batch statistics and updates its running statistics
only in training mode (see ``torch.nn.Module.train`` and ``torch.nn.modules.batchnorm``).
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["mode_dependent", "active_in_training", "inactive", "describe"]

_cache: dict[int, tuple[Any, list[Any]]] = {}  # id(model) -> (weakref(model), modules)


def mode_dependent(model: Any) -> list[Any]:
    """The model's Dropout (``p > 0``) and stat-tracking BatchNorm submodules (cached per model)."""
    entry = _cache.get(id(model))
    found = entry[1] if entry is not None and entry[0]() is model else None
    if found is None:
        from torch.nn.modules.batchnorm import _BatchNorm
        from torch.nn.modules.dropout import _DropoutNd

        found = [m for m in model.modules()
                 if (isinstance(m, _DropoutNd) and m.p > 0)
                 or (isinstance(m, _BatchNorm) and m.track_running_stats)]
        key = id(model)
        _cache[key] = (weakref.ref(model, lambda _, key=key: _cache.pop(key, None)), found)
    return found


def active_in_training(model: Any) -> list[Any]:
    """Mode-dependent submodules that are in training mode right now."""
    return [m for m in mode_dependent(model) if m.training]


def inactive(model: Any) -> list[Any]:
    """Mode-dependent submodules that are in evaluation mode right now."""
    return [m for m in mode_dependent(model) if not m.training]


def describe(modules: list[Any], limit: int = 3) -> str:
    """``"Dropout(p=0.5), BatchNorm1d(16)"`` for a finding's message."""
    parts = []
    for m in modules[:limit]:
        if hasattr(m, "p"):
            parts.append(f"{type(m).__name__}(p={m.p})")
        else:
            parts.append(f"{type(m).__name__}({getattr(m, 'num_features', '')})")
    more = f" and {len(modules) - limit} more" if len(modules) > limit else ""
    return ", ".join(parts) + more
