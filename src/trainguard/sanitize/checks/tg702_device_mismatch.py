"""TG702 device-mismatch: tensors on different devices met in one operation.

What it watches: nothing on a healthy step. When the run dies of PyTorch's device error
("Expected all tensors to be on the same device", "... is not on the expected device ...", or
"Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"), it
reads the failing frames once: the module that raised (its name in the model and its parameters'
devices), the tensors that module's ``forward`` held, and the tensors and models named in the user's
failing line's frame.

When it fires: on that error. The diagnosis names each device and what is on it: `x` on cpu,
the parameters of `Linear` `0` on cuda:0, so the user sees which side to move.

Silent on: runs without this error.

Cost: only at PyTorch's device-mismatch error: the locals of the two user frames of the traceback
and their models' modules and parameters.

Reference: "CUDA semantics" https://pytorch.org/docs/stable/notes/cuda.html; forum thread
https://discuss.pytorch.org/t/expected-all-tensors-to-be-on-the-same-device-but-found-at-least-two-devices-cuda-0-and-cpu-error/151314.
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.frames import is_user_file

_PATTERNS = ("Expected all tensors to be on the same device", "is not on the expected device",
             "should be the same or input should be a MKLDNN tensor")


class DeviceMismatch(Check):
    code = "TG702"

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        text = str(exc)
        if not any(p in text for p in _PATTERNS):
            return None
        import torch
        from torch import nn

        by_device: dict[str, list[str]] = {}

        def note(device: Any, what: str) -> None:
            names = by_device.setdefault(str(device), [])
            if what not in names and len(names) < 4:
                names.append(what)

        module_frame, user_frame = _frames(exc)
        failed = self.state.failed_module
        models = list(self.state.models)
        if user_frame is not None:
            models += [v for v in user_frame.f_locals.values() if isinstance(v, nn.Module)]
        if module_frame is not None:
            for name, value in module_frame.f_locals.items():
                if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                    note(value.device, f"`{name}` given to {type(module_frame.f_locals['self']).__name__}.forward")
        if failed is not None:
            for pname, p in failed.named_parameters(recurse=False):
                note(p.device, f"{_qualified(models, failed)}.{pname}")
        if user_frame is not None:
            for name, value in user_frame.f_locals.items():
                if isinstance(value, nn.Parameter):
                    continue
                if isinstance(value, torch.Tensor):
                    note(value.device, f"`{name}`")
                elif isinstance(value, nn.Module):
                    devices = {str(p.device) for p in value.parameters()}
                    for d in devices:
                        note(d, f"`{name}`'s parameters")
        if len(by_device) < 2:
            return Diagnosis(f"two tensors of one operation are on different devices ({text.splitlines()[0]})",
                             fix="move the model and every tensor it meets to one device with "
                                 "`.to(device)`")
        parts = "; ".join(f"on {d}: {', '.join(w)}" for d, w in sorted(by_device.items()))
        return Diagnosis(
            f"tensors on {len(by_device)} devices met in one operation: {parts}",
            fix="create one `device = torch.device(...)`, call `model.to(device)` once, and move each "
                "batch with `x = x.to(device)` (tensors made inside forward: `device=x.device`)")


def _frames(exc: BaseException) -> tuple[Any, Any]:
    """The innermost ``nn.Module.forward`` frame and the innermost user frame of the traceback."""
    from torch import nn

    module_frame = user_frame = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if isinstance(frame.f_locals.get("self"), nn.Module) and frame.f_code.co_name == "forward":
            module_frame = frame
        if is_user_file(frame.f_code.co_filename):
            user_frame = frame
        tb = tb.tb_next
    return module_frame, user_frame


def _qualified(models: list[Any], module: Any) -> str:
    for model in models:
        for qual, sub in model.named_modules():
            if sub is module:
                return f"{type(model).__name__}.{qual}" if qual else type(model).__name__
    return type(module).__name__
