"""The registration probe: parameters and submodules registered on a module already built.

PyTorch's global registration hooks (``torch.nn.modules.module.
register_module_parameter_registration_hook`` and ``register_module_module_registration_hook``)
run once per ``register_parameter``/``add_module`` (which ``Module.__setattr__`` calls), not per
step. A registration made while some module's ``__init__`` is on the stack is part of building a
module (``nn.Linear(...)``, a model's own layers, ``DDP(model)``, weights tied in ``post_init``)
and sends nothing. Any other registration that user code made, directly or through a library
helper it called, becomes ``on_params_added(module, params, where)`` with the user's line: a head
assigned after the optimizer was built (``model.fc = nn.Linear(...)``, ``model[2] = ...``), a
parameter created in a training hook (``self.scale = nn.Parameter(...)`` in a LightningModule's
``on_train_epoch_start``). Installed only while a check listens.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.probes.patch import Undo

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]

FRAMES_TO_USER = 12  # frames from a registration hook up to the user's assignment, at most


def attach(bus: "Bus") -> list[Undo]:
    """Register the two global registration hooks when a check listens to ``on_params_added``;
    returns the actions that remove them."""
    if not bus.handlers["on_params_added"]:
        return []
    from torch.nn import Parameter
    from torch.nn.modules.module import (register_module_module_registration_hook,
                                         register_module_parameter_registration_hook)

    def note(module: Any, value: Any, start: Any, what: str) -> None:
        try:
            frame = _site(start)
            if frame is None:
                return
            params = [value] if isinstance(value, Parameter) else list(value.parameters())
            if params:
                bus.emit("on_params_added", module, params, frames.frame_location(frame))
        except Exception as exc:
            bus.hook_failed(what, exc)

    def parameter(module: Any, name: str, param: Any) -> None:
        if param is not None:
            note(module, param, sys._getframe(1), "parameter registration")

    def submodule(module: Any, name: str, sub: Any) -> None:
        if sub is not None:
            note(module, sub, sys._getframe(1), "submodule registration")

    return [register_module_parameter_registration_hook(parameter).remove,
            register_module_module_registration_hook(submodule).remove]


def _site(start: Any) -> Any:
    """The user's frame that made the registration, or None while a module is being built (an
    ``__init__`` of a module on the way up) or no user frame is near."""
    from torch import nn

    frame = start
    for _ in range(FRAMES_TO_USER):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), nn.Module):
            return None
        if frames.is_user_code(code):
            return frame
        frame = frame.f_back
    return None
