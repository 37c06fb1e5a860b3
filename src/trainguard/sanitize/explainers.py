"""Diagnoses of PyTorch errors whose checks live elsewhere: TG404 and TG702.

The runtime checks for these codes (a batch of one reaching BatchNorm before it fails, tensors that
meet on different devices) belong in ``checks/``; these explainers only read the error a script
died of, plus the module call that raised (``State.failed_module``/``failed_inputs``). The watcher
adds them unless a discovered check of the same code explains errors itself.
"""

from __future__ import annotations

import re
from typing import Any

from trainguard.sanitize.checks import Check, Diagnosis
from trainguard.sanitize.holders import traceback_user_frames

__all__ = ["BUILTIN_EXPLAINERS", "BatchOfOneError", "DeviceMismatchError"]


def _module_name(root: Any, module: Any) -> str:
    if root is not None and module is not None:
        for name, sub in root.named_modules():
            if sub is module and name:
                return f"{type(root).__name__}.{name} ({type(module).__name__})"
    return type(module).__name__ if module is not None else "a module"


class BatchOfOneError(Check):
    """TG404: BatchNorm in training mode got one value per channel (PyTorch raises ValueError)."""

    code = "TG404"
    _MESSAGE = re.compile(r"Expected more than 1 value per channel when training, got input size "
                          r"torch\.Size\((?P<size>\[[\d, ]*\])\)")

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        m = self._MESSAGE.search(str(exc))
        if m is None:
            return None
        where = _module_name(self.state.failed_root, self.state.failed_module)
        loader = self._partial_last_batch(exc)
        tail = (f"; the DataLoader `{loader[0]}` has {loader[1]} samples in batches of {loader[2]}, "
                "so its last batch holds one sample" if loader else "")
        return Diagnosis(
            f"{where} is in training mode and got an input of size {m.group('size')}: one value "
            f"per channel, from which no batch statistics can be computed{tail}",
            fix="pass drop_last=True to the training DataLoader, use a larger batch, or use "
                "GroupNorm/LayerNorm; BatchNorm in eval mode (model.eval()) accepts batches of one")

    @staticmethod
    def _partial_last_batch(exc: BaseException) -> tuple[str, int, int] | None:
        from torch.utils.data import DataLoader

        for frame in traceback_user_frames(exc):
            for name, value in list(frame.f_locals.items()):
                if isinstance(value, DataLoader) and value.batch_size and not value.drop_last:
                    try:
                        size = len(value.dataset)  # type: ignore[arg-type]
                    except TypeError:
                        continue
                    if size % value.batch_size == 1:
                        return name, size, value.batch_size
        return None


class DeviceMismatchError(Check):
    """TG702: tensors on different devices met in one op."""

    code = "TG702"
    _MESSAGES = ("Expected all tensors to be on the same device", "is not on the expected device")

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        text = str(exc)
        if not any(m in text for m in self._MESSAGES):
            return None
        module = self.state.failed_module
        if module is None:
            return Diagnosis(f"tensors on different devices met in one op ({text.splitlines()[0]})",
                             fix="move every input to the model's device: x = x.to(device)")
        params = sorted({str(p.device) for p in module.parameters(recurse=False)}
                        | {str(b.device) for b in module.buffers(recurse=False)})
        inputs = ", ".join(f"{shape} on {device}" for shape, device in self.state.failed_inputs)
        where = _module_name(self.state.failed_root, module)
        held = f"its parameters are on {', '.join(params)}" if params else "it has no parameters"
        return Diagnosis(
            f"{where} got inputs {inputs or '(none seen)'}, but {held}",
            fix=f"move the inputs to the model's device before the call (x = x.to("
                f"{params[0] if params else 'device'!r})), or the model with model.to(device)")


BUILTIN_EXPLAINERS: list[type[Check]] = [BatchOfOneError, DeviceMismatchError]
