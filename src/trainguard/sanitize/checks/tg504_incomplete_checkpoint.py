"""TG504 incomplete-checkpoint: a resume checkpoint that leaves the optimizer out.

What it watches: every ``torch.save`` call's object (no tensor values are read).

When it fires: the saved object is a dict that holds a model's state (an ``nn.Module`` or a
``state_dict``: a mapping of names to tensors) and a progress counter (a number under a key naming an
epoch, step or iteration), so it is meant for resuming, while an optimizer that has stepped in this
run is alive and its ``state_dict()`` (momentum, Adam moments, step counts) is not in the dict.
Resuming from it restarts the optimizer from zero: the loss jumps and the run is not the one that
would have continued.

Where: the ``torch.save`` line, or, when ``torch.save`` sits in a helper that was handed the dict
(the ImageNet example's ``save_checkpoint(state, is_best, filename)``), the user's line that
called the helper with it, where the dict is built and the optimizer's state belongs.

Silent on: a bare ``model.state_dict()`` (an export for inference), dicts without a progress
counter, checkpoints that include ``optimizer.state_dict()`` (or the optimizer object), also as a
list of them (Lightning's ``optimizer_states``, one per optimizer), runs without an optimizer step.
A checkpoint is judged by what it holds, not by its key names.

Cost: per ``torch.save`` of a dict, one pass over its items (a state_dict's tensors checked by
type) and the user frames that passed the dict down.

Reference: PyTorch recipe "Saving and loading a general checkpoint"
https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html; GitHub
issue https://github.com/NVlabs/stylegan2-ada-pytorch/issues/108.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import frame_location, is_user_code, user_frame

_PROGRESS = re.compile(r"epoch|step|iter", re.IGNORECASE)


class IncompleteCheckpoint(Check):
    code = "TG504"

    def on_save(self, obj: Any, f: Any) -> None:
        if not isinstance(obj, Mapping) or not self.state.optimizers:
            return
        model_keys = [k for k, v in obj.items() if _is_model_state(v)]
        if not model_keys:
            return
        progress = [k for k, v in obj.items() if isinstance(k, str) and _PROGRESS.search(k)
                    and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not progress or any(_is_optimizer_state(v) for v in obj.values()):
            return
        live = sorted({type(o).__name__ for o in self.state.optimizers})
        keys = ", ".join(repr(k) for k in list(obj)[:8])
        self.report(
            f"torch.save of a resume checkpoint (keys {keys}: model state and "
            f"{progress[0]!r}) leaves out the state of the live {'/'.join(live)} optimizer: "
            "resuming restarts its momentum/moment estimates and step counts from zero",
            fix="add 'optimizer': optimizer.state_dict() (and the scheduler's and GradScaler's "
                "state_dict(), RNG states) to the checkpoint and load them when resuming",
            where=_built_at(obj, sys._getframe(1)))


def _built_at(obj: Any, start: Any) -> Any:
    """Where the checkpoint dict was built: the line of ``torch.save``, or, when ``torch.save``
    sits in a helper that was handed the dict (``save_checkpoint(state, ...)``), the line of the
    user's code that called the helper with it (outermost such caller). None: the default line."""
    frame = user_frame(start)
    while frame is not None:
        code = frame.f_code
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        local = frame.f_locals
        if not any(local.get(name) is obj for name in params):
            break  # built in this function
        caller = frame.f_back
        if caller is None or not is_user_code(caller.f_code):
            break
        frame = caller
    return frame_location(frame) if frame is not None else None


def _is_model_state(value: Any) -> bool:
    import torch
    from torch import nn

    if isinstance(value, nn.Module):
        return True
    if isinstance(value, Mapping) and value:
        return all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    return False


def _is_optimizer_state(value: Any) -> bool:
    """An optimizer, its ``state_dict()``, or a non-empty list or tuple of them (Lightning's
    ``optimizer_states``)."""
    import torch

    if isinstance(value, (list, tuple)) and value:
        return all(_is_optimizer_state(v) for v in value)
    if isinstance(value, torch.optim.Optimizer):
        return True
    return isinstance(value, Mapping) and "state" in value and "param_groups" in value
