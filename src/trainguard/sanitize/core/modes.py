"""Which submodules of a model behave differently in training and evaluation mode.

The definition is :data:`trainguard.apifacts.MODE_RULES`, shared with the linter and
``trainguard explain``: Dropout (and AlphaDropout, FeatureAlphaDropout) with ``p > 0``; BatchNorm
that keeps running statistics; InstanceNorm with ``track_running_stats=True``; RNN/LSTM/GRU with
``dropout > 0`` (between layers); MultiheadAttention with ``dropout > 0``; and a user-defined
module whose ``forward`` reads ``self.training`` (``READS_TRAINING``) where that read changes
its numbers (``training_read_matters``: not an ``if`` that only picks what to return). See
``torch.nn.Module.train`` and each module's docs (cited in ``apifacts.py``).
"""

from __future__ import annotations

import ast
import weakref
from typing import Any

from trainguard.apifacts import MODE_CLASSES, READS_TRAINING, ModeRule, mode_rule, \
    training_read_matters

__all__ = ["mode_dependent", "active_in_training", "inactive", "describe", "frozen_norm",
           "keeps_statistics", "rule_of", "hooked_by_user", "depends_on_mode"]

_cache: dict[int, list[Any]] = {}  # id(model) -> [weakref(model), candidates, queries]
_REFRESH = 256  # queries between two walks of a model (a head swapped in later is seen)
_READS = "reads"  # a user-defined module whose forward reads self.training
# held weakly: a user class keeps its module's globals (the script's model) alive
_by_class: "weakref.WeakKeyDictionary[type, ModeRule | str | None]" = weakref.WeakKeyDictionary()


def rule_of(module: Any) -> ModeRule | str | None:
    """The :class:`~trainguard.apifacts.ModeRule` of ``module``'s ``torch.nn`` class (or of the
    ``torch.nn`` class it derives from), ``"reads"`` for a user-defined module whose ``forward``
    reads ``self.training``, or None (cached per class)."""
    cls = type(module)
    if cls in _by_class:
        return _by_class[cls]
    found: ModeRule | str | None = None
    for base in cls.__mro__:
        if base.__name__ in MODE_CLASSES and base.__module__.startswith("torch.nn"):
            found = mode_rule(base.__name__)
            break
    if found is None and not cls.__module__.startswith("torch."):
        code = getattr(getattr(cls, "forward", None), "__code__", None)
        if code is not None and READS_TRAINING in code.co_names and _read_matters(code):
            found = _READS
    _by_class[cls] = found
    return found


def _read_matters(code: Any) -> bool:
    """Whether the ``self.training`` reads of the ``forward`` running ``code`` change its numbers
    (:func:`~trainguard.apifacts.training_read_matters`); True where its source is not read."""
    from trainguard.sanitize.core.source import function_node

    try:
        node = function_node(code)
        return not isinstance(node, ast.FunctionDef) or training_read_matters(node)
    except Exception:  # an aid to precision: never in the way of the check
        return True


def _candidates(model: Any) -> list[Any]:
    """Every submodule of ``model`` some rule covers (cached per model, walked again every
    ``_REFRESH`` queries)."""
    entry = _cache.get(id(model))
    if entry is not None and entry[0]() is model and entry[2] < _REFRESH:
        entry[2] += 1
        return entry[1]
    found = [m for m in model.modules() if rule_of(m) is not None]
    key = id(model)
    _cache[key] = [weakref.ref(model, lambda _, key=key, cache=_cache: cache.pop(key, None)),
                   found, 0]
    return found


def depends_on_mode(m: Any) -> bool:
    """The rule's attribute says so; a norm layer also needs its running buffers (one whose
    buffers were set to None normalizes with batch statistics in both modes)."""
    rule = rule_of(m)
    if rule == _READS:
        return True
    if not isinstance(rule, ModeRule) or not rule.depends(getattr(m, rule.attribute, rule.default)):
        return False
    return rule.attribute != "track_running_stats" or getattr(m, "running_mean", None) is not None


def mode_dependent(model: Any) -> list[Any]:
    """The model's mode-dependent submodules (itself included), as they are now."""
    return [m for m in _candidates(model) if depends_on_mode(m)]


def active_in_training(model: Any) -> list[Any]:
    """Mode-dependent submodules that are in training mode right now."""
    return [m for m in mode_dependent(model) if m.training]


def inactive(model: Any) -> list[Any]:
    """Mode-dependent submodules that are in evaluation mode right now."""
    return [m for m in mode_dependent(model) if not m.training]


def keeps_statistics(m: Any) -> bool:
    """A norm layer whose mode decides whether it keeps running statistics (BatchNorm,
    InstanceNorm with ``track_running_stats=True``): in eval mode it only stops learning them."""
    rule = rule_of(m)
    return isinstance(rule, ModeRule) and rule.attribute == "track_running_stats"


def frozen_norm(m: Any) -> bool:
    """A norm layer keeping running statistics whose own affine parameters are all frozen
    (``requires_grad=False``): a frozen BatchNorm, which a model kept in eval mode while it
    trains leaves wholly fixed, as DeepLab-style fine-tuning means it to
    (isht7/pytorch-deeplab-resnet#15)."""
    if not keeps_statistics(m):
        return False
    params = list(m.parameters(recurse=False))
    return bool(params) and not any(p.requires_grad for p in params)


def describe(modules: list[Any], limit: int = 3) -> str:
    """``"Dropout(p=0.5), BatchNorm1d(16), LSTM(dropout=0.2)"`` for a finding's message."""
    parts = []
    for m in modules[:limit]:
        rule, name = rule_of(m), type(m).__name__
        if rule == _READS:
            parts.append(f"{name} (its forward reads self.training)")
        elif isinstance(rule, ModeRule) and rule.attribute != "track_running_stats":
            parts.append(f"{name}({rule.attribute}={getattr(m, rule.attribute)})")
        else:
            parts.append(f"{name}({getattr(m, 'num_features', '')})")
    more = f" and {len(modules) - limit} more" if len(modules) > limit else ""
    return ", ".join(parts) + more


def hooked_by_user(model: Any, limit: int = 256) -> bool:
    """A forward hook of user code sits on ``model`` or one of its first ``limit`` submodules
    (``layer.register_forward_hook(lambda m, i, o: feats.append(o))``): a forward whose own
    output is dropped still hands activations to the user (feature extraction), unlike a
    BatchNorm recalibration pass."""
    from trainguard.sanitize.core.frames import is_user_code

    for i, m in enumerate(model.modules()):
        if i >= limit:
            break
        for hook in getattr(m, "_forward_hooks", {}).values():
            code = getattr(hook, "__code__", None) or getattr(
                getattr(hook, "__func__", None), "__code__", None)
            if code is not None and is_user_code(code):
                return True
    return False
