"""Weights drawn before the run's seed: the parameters of models already built when torch is
seeded, whose values came from an unseeded draw and are still the ones the optimizer starts from.

A freshly built ``nn.Linear``/``nn.Conv2d``/``nn.LSTM`` fills each parameter once, in place, from
torch's default generator (``reset_parameters``: ``kaiming_uniform_``, ``uniform_``): its version
counter is 1 and its values are not all equal. Loaded weights have been copied into again
(``load_state_dict``: version 2 or more) or were made by unpickling (version 0); constant fills
(BatchNorm's ones and zeros) have equal values. The models are looked for among the locals of
the user's frames on the stack at the seeding call (``model = build(); seed_everything(seed)``
in one function, or at the top level), and in the attributes of a ``self`` there.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.frames import Location, user_frames, user_location
from trainguard.sanitize.core.values import readable

_FRAMES = 6  # user frames looked at, innermost first
_PARAMS = 8  # parameters kept per seeding call


class EarlyWeights:
    """Parameters drawn before a seeding call: weak references, their versions then, the name
    and class of the model that holds them."""

    __slots__ = ("params", "versions", "model", "where")

    def __init__(self, params: list[Any], model: str, where: Location | None) -> None:
        self.params = [weakref.ref(p) for p in params]
        self.versions = [p._version for p in params]
        self.model = model
        self.where = where  # the line running in the frame that holds the model

    def unchanged_in(self, held: set[int]) -> bool:
        """Whether a kept parameter is held (``id`` in ``held``) and was not written since."""
        for ref, version in zip(self.params, self.versions):
            p = ref()
            if p is not None and id(p) in held and p._version == version:
                return True
        return False


def _modules(frame: Any, nn: Any) -> list[tuple[str, Any]]:
    found = []
    for name, value in list(frame.f_locals.items()):
        if isinstance(value, nn.Module):
            found.append((name, value))
        elif name == "self":
            found += [(f"self.{k}", v) for k, v in list(vars(value).items())
                      if isinstance(v, nn.Module)] if hasattr(value, "__dict__") else []
    return found


def _drawn(p: Any) -> bool:
    """Filled once in place with values that are not all equal (an initializer's draw)."""
    if not p.requires_grad or p._version != 1 or p.numel() < 2 or not readable(p):
        return False
    flat = p.detach().reshape(-1)[:64]  # note: a sync on CUDA, once per run
    return bool((flat != flat[0]).any())


def weights_drawn_before(start: Any) -> EarlyWeights | None:
    """The parameters (a few) of the first model found in the user's frames from ``start``
    outwards whose weights were drawn by their initializers; None when there is none."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    seen: set[int] = set()
    for frame in user_frames(start, limit=_FRAMES):
        for name, module in _modules(frame, torch.nn):
            if id(module) in seen:
                continue
            seen.add(id(module))
            params = [p for p in module.parameters() if _drawn(p)][:_PARAMS]
            if params:
                return EarlyWeights(params, f"{name} ({type(module).__name__})",
                                    user_location(frame))
    return None
