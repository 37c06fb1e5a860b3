"""The parameters of a model, as an optimizer would need them, and their values.

- :func:`all_parameters`: ``model.named_parameters()`` plus the parameters of modules kept in
  plain list, tuple or dict attributes (not registered, so ``model.parameters()`` misses them;
  https://pytorch.org/docs/stable/generated/torch.nn.ModuleList.html says why they must be);
- :func:`held_ids`: the ``id()`` of every parameter some optimizer holds;
- :func:`no_gradients`: whether no optimizer holds a non-zero gradient;
- :func:`value_sum`: a value fingerprint of one parameter;
- :class:`ParamMap`: values keyed by parameter, held weakly.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.values import readable

__all__ = ["ParamMap", "all_parameters", "param_names", "doubled_parameters", "held_ids",
           "no_gradients", "shown_names", "value_sum", "zeroed_by"]


def value_sum(p: Any) -> float | None:
    """A value fingerprint of ``p``: the sum of its elements (a sync on CUDA; suspects only), or
    None on a device whose values are not read (meta: then its version counter alone tells)."""
    import torch

    if not readable(p):
        return None
    with torch.no_grad():
        return float(p.detach().sum(dtype=torch.float64)) if p.numel() else 0.0


def no_gradients(optimizers: list[Any]) -> bool:
    """Whether none of ``optimizers`` holds a non-zero gradient (None, or zeros left by
    ``zero_grad(set_to_none=False)``)."""
    for o in optimizers:
        for g in o.param_groups:
            for p in g["params"]:
                grad = p.grad
                if grad is not None and (grad.is_sparse or not readable(grad)
                                         or bool(grad.any())):
                    return False  # (a gradient whose values cannot be read counts as one)
    return bool(optimizers)


# module class -> defined by PyTorch itself; held weakly (a user class keeps its globals alive)
_TORCH_CLASS: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()


def all_parameters(model: Any) -> list[tuple[str, Any, str]]:
    """``(name, param, "")`` for each of ``model.named_parameters()``, then the parameters of
    modules that ``model`` or its submodules keep in plain list, tuple or dict attributes (not
    registered, so ``model.parameters()`` misses them) as ``(name, param, attribute)``: one walk
    over the modules."""
    out: list[tuple[str, Any, str]] = []
    extra: list[tuple[str, Any, str]] = []
    memo: set[int] = set()  # as named_parameters(): a parameter shared by two modules once
    for prefix, module in model.named_modules():
        for name, p in module._parameters.items():
            if p is None or id(p) in memo:
                continue
            memo.add(id(p))
            out.append((f"{prefix}.{name}" if prefix else name, p, ""))
        _unregistered_in(model, prefix, module, extra)
    return out + extra


def _unregistered_in(model: Any, prefix: str, module: Any, out: list[tuple[str, Any, str]]) -> None:
    """The parameters of modules that ``module`` (one of ``model``'s, named ``prefix``) keeps in
    plain list, tuple or dict attributes, appended to ``out`` as ``(name, param, attribute)``."""
    from torch import nn

    cls = type(module)
    own = _TORCH_CLASS.get(cls)
    if own is None:
        own = _TORCH_CLASS[cls] = cls.__module__.startswith("torch.")
    if own:  # PyTorch's own modules register every submodule they hold
        return
    for attr, value in vars(module).items():
        if attr.startswith("_") or not isinstance(value, (list, tuple, dict)) or not value:
            continue
        first = next(iter(value.values())) if isinstance(value, dict) else value[0]
        if not isinstance(first, nn.Module):
            continue  # a container of other things (kept on a model: look no further)
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, nn.Module) and item is not model:
                where = f"{prefix}.{attr}" if prefix else attr
                for name, p in item.named_parameters():
                    out.append((f"{where}[{key!r}].{name}", p, where))


def held_ids(optimizers: list[Any]) -> set[int]:
    """``id()`` of every parameter in the ``param_groups`` of ``optimizers``."""
    return {id(p) for o in optimizers for g in o.param_groups for p in g["params"]}


def zeroed_by(owner: Any) -> list[Any]:
    """The parameters ``owner.zero_grad()`` clears: an optimizer's ``param_groups``, or a
    module's ``parameters()``."""
    if hasattr(owner, "param_groups"):
        return [p for g in owner.param_groups for p in g["params"]]
    return list(owner.parameters())


class ParamMap:
    """Values keyed by parameter, held weakly. ``id()`` is reused once a parameter is freed (a new
    model per fold), so an entry counts only while its weak reference gives the same parameter;
    entries of freed parameters are dropped once there are more than ``limit``."""

    __slots__ = ("_items", "limit")

    def __init__(self, limit: int = 4096) -> None:
        self._items: dict[int, tuple[Any, Any]] = {}
        self.limit = limit

    def __setitem__(self, p: Any, value: Any) -> None:
        self._items[id(p)] = (weakref.ref(p), value)
        if len(self._items) > self.limit:
            self._items = {k: v for k, v in self._items.items() if v[0]() is not None}

    def get(self, p: Any, default: Any = None) -> Any:
        found = self._items.get(id(p))
        return found[1] if found is not None and found[0]() is p else default

    def __contains__(self, p: Any) -> bool:
        found = self._items.get(id(p))
        return found is not None and found[0]() is p


def doubled_parameters(optimizers: Any) -> tuple[Any, str] | None:
    """An optimizer that holds the same parameter more than once (PyTorch warns, "optimizer
    contains a parameter group with duplicate parameters", pytorch/pytorch#40967), with a phrase
    for the finding; None when none does."""
    for o in list(optimizers):
        ids = [id(p) for g in o.param_groups for p in g["params"]]
        extra = len(ids) - len(set(ids))
        if extra:
            return o, (f"the {type(o).__name__} that steps was given {extra} "
                       f"parameter{'s' if extra != 1 else ''} twice, as after a copy-paste slip "
                       "that left this module out")
    return None


def param_names(models: Any, ids: set[int], frame: Any = None) -> dict[int, str]:
    """``id(param) -> "name (shape)"`` for ``ids``, by their names in ``models``; those no model
    holds, by their names in a module that a variable of the user's ``frame`` (the one that
    steps) holds, as ``bank.mnemonics`` (a module whose parameters an optimizer got and that
    is never called, so never seen as a model)."""
    names: dict[int, str] = {}
    for model in list(models):
        for name, p in model.named_parameters():
            if id(p) in ids and id(p) not in names:
                names[id(p)] = f"{name} {tuple(p.shape)}"
    if frame is not None and ids - names.keys():
        names.update(_names_in_frame(frame, ids - names.keys()))
    for key in ids - names.keys():
        names[key] = "an unnamed parameter"
    return names


def _names_in_frame(frame: Any, ids: set[int], limit: int = 256) -> dict[int, str]:
    """``id(param) -> "variable.name (shape)"`` for those of ``ids`` held by a module in a
    variable of ``frame`` or of its module's globals (``limit`` values looked at)."""
    from torch import nn

    names: dict[int, str] = {}
    values = [*frame.f_locals.items(), *frame.f_globals.items()][:limit]
    for var, value in values:
        if isinstance(value, nn.Module) and not var.startswith("_"):
            for name, p in value.named_parameters():
                if id(p) in ids and id(p) not in names:
                    names[id(p)] = f"{var}.{name} {tuple(p.shape)}"
    return names


def shown_names(names: list[Any]) -> str:
    """The first three of ``names`` and how many more, for a message."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(map(str, names[:3])) + more
