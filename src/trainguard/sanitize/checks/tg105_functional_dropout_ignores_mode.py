"""TG105 functional-dropout-ignores-mode: ``F.dropout`` inside ``forward`` keeps dropping in eval.

What it watches: calls of ``F.dropout``, ``F.dropout1d/2d/3d``, ``F.alpha_dropout`` and
``F.feature_alpha_dropout`` (narrow wrappers; nothing else is intercepted). ``nn.Dropout`` passes
``training=self.training`` itself and costs one argument check.

When it fires: the call leaves ``training`` at its default (True), ``p > 0``, and the module whose
``forward`` makes the call is in eval mode: dropout stays on after ``model.eval()``, so evaluation
is random. Reported at the ``F.dropout`` line.

Silent on: ``F.dropout(x, p, training=self.training)``; an explicit ``training=True`` (Monte Carlo
dropout on purpose); calls in training mode; calls outside any module (the mode is unknown).

Cost: per checked ``F.dropout`` call in eval mode, 4 frames looked at for the calling module.

Reference: ``torch.nn.functional.dropout`` docs ("training: apply dropout if True. Default: True")
(https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html); GitHub
pytorch/pytorch#26338 ("Behavior of F.dropout in eval mode") and Coderx7/SimpleNet#2.
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check


def _calling_module(frame: Any, *, depth: int = 4) -> Any:
    """The module whose method (``forward`` or a helper it calls) made the call: the first
    ``self`` that is an ``nn.Module`` within ``depth`` frames of the caller, else None."""
    from torch import nn

    while frame is not None and depth > 0:
        found = frame.f_locals.get("self")
        if isinstance(found, nn.Module):
            return found
        frame, depth = frame.f_back, depth - 1
    return None


class FunctionalDropoutIgnoresMode(Check):
    code = "TG105"

    def on_functional(self, name: str, args: tuple, kwargs: dict) -> None:
        if len(args) >= 3 or "training" in kwargs or not self.state.modules:
            return
        p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
        module = _calling_module(self.state.functional_caller)
        if module is None or module.training or not p:
            return
        self.report(
            f"F.{name}(..., p={p}) in {type(module).__name__}.forward uses its default "
            f"training=True while {type(module).__name__} is in eval mode: dropout still drops "
            "activations after model.eval()",
            fix=f"pass training=self.training (F.{name}(x, p, training=self.training)) or use "
                f"an nn.Dropout module")
