"""Which submodules of a model behave differently in training and evaluation mode.

Dropout with ``p > 0`` drops activations only in training mode; BatchNorm with
``track_running_stats=True`` normalises with batch statistics and updates its running statistics
only in training mode (see ``torch.nn.Module.train`` and ``torch.nn.modules.batchnorm``).
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["mode_dependent", "active_in_training", "inactive", "describe"]

_cache: dict[int, list[Any]] = {}  # id(model) -> [weakref(model), candidates, queries]
_REFRESH = 256  # queries between two walks of a model (a head swapped in later is seen)


def _candidates(model: Any) -> list[Any]:
    """Every Dropout and BatchNorm submodule of ``model`` (cached per model, walked again every
    ``_REFRESH`` queries)."""
    entry = _cache.get(id(model))
    if entry is not None and entry[0]() is model and entry[2] < _REFRESH:
        entry[2] += 1
        return entry[1]
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd

    found = [m for m in model.modules() if isinstance(m, (_DropoutNd, _BatchNorm))]
    key = id(model)
    _cache[key] = [weakref.ref(model, lambda _, key=key: _cache.pop(key, None)), found, 0]
    return found


def _depends_on_mode(m: Any) -> bool:
    """Dropout with ``p > 0``; BatchNorm that keeps running statistics (one built with
    ``track_running_stats=False``, or whose running buffers were set to None, normalizes with
    batch statistics in both modes)."""
    if hasattr(m, "p"):
        return m.p > 0
    return bool(m.track_running_stats) and getattr(m, "running_mean", None) is not None


def mode_dependent(model: Any) -> list[Any]:
    """The model's Dropout (``p > 0``) and stat-tracking BatchNorm submodules, as they are now."""
    return [m for m in _candidates(model) if _depends_on_mode(m)]


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
