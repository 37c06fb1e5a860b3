"""The construction probe: where user code built a DataLoader, a sampler, an optimizer or an activation.

``DataLoader.__init__``, ``DistributedSampler.__init__``, ``torch.optim.Optimizer.__init__``
(which every PyTorch optimizer's constructor calls) and the constructors of ``nn.Softmax``,
``nn.Softmax2d`` and ``nn.Sigmoid`` become ``on_built(obj, where)`` once the original constructor
has returned, with ``where`` the user's line that built it. Checks that report a fault whose fix
belongs where the object was built (a DataLoader without ``drop_last``, a sampler never given
``set_epoch``, a model ending in ``nn.Softmax`` before ``CrossEntropyLoss``) keep the line
themselves. Installed only when a check listens; a run builds these a few times, never per step.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.probes.patch import Undo, patch

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap the three constructors when a check listens to ``on_built``; returns the undo
    actions."""
    undo: list[Undo] = []
    if not bus.handlers["on_built"]:
        return undo
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    def make(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            try:
                bus.emit("on_built", self, frames.user_location(_builder(self)))
            except Exception as exc:
                bus.hook_failed(f"{type(self).__name__}.__init__", exc)
        return __init__

    for cls in (DataLoader, DistributedSampler, torch.optim.Optimizer, torch.nn.Softmax,
                torch.nn.Softmax2d, torch.nn.Sigmoid):
        patch(cls, "__init__", make, undo)
    return undo


def _builder(obj: Any) -> Any:
    """The frame that built ``obj``: above the constructors running on it (``Adam.__init__``
    calling ``Optimizer.__init__``, a user subclass calling ``super().__init__``)."""
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None or frame.f_code.co_name != "__init__" or \
                frame.f_locals.get("self") is not obj:
            break
        frame = frame.f_back
    return frame
