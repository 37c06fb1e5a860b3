"""What a checkpoint holds, told from the objects handed to ``torch.save``: a model's state, an
optimizer's, an LR scheduler's, a GradScaler's; which optimizer trains the weights saved;
whether an enabled GradScaler is in use in the frames that saved; and whether the function that
built it saves whatever its caller hands it.

No tensor values are read: a ``state_dict`` is told by its keys and value types, the optimizer
that trains saved weights by the storage the saved tensors share with its parameters.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Mapping
from typing import Any

from trainguard.sanitize.core.bounds import live_objects
from trainguard.sanitize.core.frames import user_frame, user_frames

__all__ = ["another_models_state", "is_model_state", "is_optimizer_state", "is_scaler_state",
           "is_scheduler_state", "live_parameters", "optimizer_settings", "saves_what_it_is_given",
           "scaler_in_use", "trainer_of"]

_NAMES = 256  # saved tensors, and parameters of one group, looked at


def trainer_of(obj: Mapping, optimizers: Any) -> Any:
    """The optimizer with state (it has stepped) that holds parameters whose storage the saved
    ``state_dict`` shares (``state_dict()`` returns detached views of them); None if none."""
    import torch

    saved = {v.data_ptr() for v in list(obj.values())[:_NAMES] if isinstance(v, torch.Tensor)
             and v.device.type != "meta"}
    for optimizer in optimizers:
        if optimizer.state and any(p.data_ptr() in saved for g in optimizer.param_groups
                                   for p in g["params"][:_NAMES]):
            return optimizer
    return None


def another_models_state(states: list[Any], optimizers: Any) -> bool:
    """Whether the model states saved belong to a model other than the one being trained: no
    tensor shares storage with a parameter a live optimizer holds (``state_dict()`` returns
    detached views of the parameters), and some are the parameters of other live modules (a
    pretrained model built to be published, an EMA or teacher copy). A copy of the trained weights
    (``copy.deepcopy(model.state_dict())``, ``.cpu()`` of CUDA tensors) is no live parameter: it
    is not told apart, and is judged as the trained model's."""
    import torch
    from torch import nn

    def pointers(tensors: Any) -> set[int]:
        return {t.data_ptr() for t in tensors if isinstance(t, torch.Tensor)
                and t.device.type != "meta" and t.data_ptr()}

    saved: set[int] = set()
    for state in states:
        saved |= pointers(state.parameters() if isinstance(state, nn.Module) else state.values())
    held = pointers(p for o in optimizers for g in o.param_groups for p in g["params"])
    if not saved or saved & held:
        return False
    # a heap scan, only for states that are not the trained weights (rare)
    return bool(saved & pointers(ref() for ref in live_parameters().values()))


def optimizer_settings(optimizer: Any) -> tuple:
    """The optimizer's constructor settings (``defaults``: lr, betas, momentum, ...) as a
    comparable tuple; tensors and other objects by type only."""
    simple = (int, float, bool, str, type(None), tuple)
    return tuple(sorted((k, v if isinstance(v, simple) else type(v).__name__)
                        for k, v in optimizer.defaults.items()))


def is_model_state(value: Any) -> bool:
    import torch
    from torch import nn

    if isinstance(value, nn.Module):
        return True
    if isinstance(value, Mapping) and value:
        return all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    return False


def is_optimizer_state(value: Any, depth: int = 2) -> bool:
    """An optimizer, its ``state_dict()``, or a non-empty list or tuple of them (Lightning's
    ``optimizer_states``); also an optimizer wrapper (an object holding one as ``.optimizer``,
    a warm-up schedule such as the Transformer's ``NoamOpt``) or its ``state_dict()``, a dict
    that holds an optimizer's among its values (``{"_step": 40, "optimizer": {...}}``), up to
    ``depth`` levels down."""
    import torch

    if isinstance(value, (list, tuple)) and value:
        return all(is_optimizer_state(v, depth) for v in value)
    if isinstance(value, torch.optim.Optimizer):
        return True
    if isinstance(getattr(value, "optimizer", None), torch.optim.Optimizer) and \
            not isinstance(value, torch.optim.lr_scheduler.LRScheduler):
        return True
    if not isinstance(value, Mapping):
        return False
    if "state" in value and "param_groups" in value:
        return True
    return depth > 0 and any(is_optimizer_state(v, depth - 1) for v in value.values()
                             if isinstance(v, Mapping))


def is_scheduler_state(value: Any) -> bool:
    import torch

    if isinstance(value, (list, tuple)) and value:
        return all(is_scheduler_state(v) for v in value)
    if isinstance(value, torch.optim.lr_scheduler.LRScheduler):
        return True
    return isinstance(value, Mapping) and "last_epoch" in value


def is_scaler_state(value: Any) -> bool:
    from torch.amp import GradScaler

    if isinstance(value, GradScaler):
        return True
    return isinstance(value, Mapping) and "scale" in value and "_growth_tracker" in value


def scaler_in_use(start: Any) -> bool:
    """An enabled GradScaler that has scaled a loss (its scale is set lazily then), held by the
    user's frames that led to the save: a local, an attribute of a local (``self.scaler``) or a
    global of those frames' modules. Bounded: 8 frames, their locals and globals, one level of
    attributes; no heap scan (a save per epoch must stay cheap)."""
    from torch.amp import GradScaler

    def used(value: Any) -> bool:
        return (GradScaler in type(value).__mro__ and value.is_enabled()
                and getattr(value, "_scale", None) is not None)

    seen: set[int] = set()
    for frame in user_frames(user_frame(start), limit=8):
        spaces = [frame.f_locals]
        if id(frame.f_globals) not in seen:
            seen.add(id(frame.f_globals))
            spaces.append(frame.f_globals)
        for space in spaces:
            for value in list(space.values())[:_NAMES]:
                if used(value):
                    return True
                try:
                    attrs = vars(value) if space is frame.f_locals else None
                except TypeError:  # no __dict__
                    continue
                if isinstance(attrs, dict) and any(used(v) for v in list(attrs.values())[:_NAMES]):
                    return True
    return False


def live_parameters() -> Any:
    """``id -> weak reference`` of the ``nn.Parameter`` objects alive now (``gc``: once per
    model-only file loaded back)."""
    from torch import nn

    # by id, with a weak reference to tell a reused id (a WeakSet compares tensors with ==)
    return {id(p): weakref.ref(p) for p in live_objects(
        lambda o: type(o) is nn.Parameter or nn.Parameter in type(o).__mro__)}


def saves_what_it_is_given(frame: Any) -> bool:
    """Whether the function running in ``frame`` saves the states its caller chooses: it takes
    an optimizer parameter left ``None`` (``save(model, optimizer=None)``, ktonal/mimikit#30), or
    collects the objects to save in ``*objects``/``**objects`` and was handed a model there
    (``save_checkpoint(path, step, model=model)``). The caller's line is then what to change."""
    code = frame.f_code
    local = frame.f_locals
    named = code.co_argcount + code.co_kwonlyargcount
    if any("optim" in name and local.get(name, 0) is None for name in code.co_varnames[:named]):
        return True
    rest = code.co_varnames[named:named + bool(code.co_flags & inspect.CO_VARARGS)
                            + bool(code.co_flags & inspect.CO_VARKEYWORDS)]
    handed = [v for name in rest for v in _values(local.get(name))]
    return any(callable(getattr(v, "state_dict", None)) and hasattr(v, "parameters")
               for v in handed)


def _values(collected: Any) -> list[Any]:
    if isinstance(collected, Mapping):
        return list(collected.values())[:_NAMES]
    return list(collected)[:_NAMES] if isinstance(collected, tuple) else []
