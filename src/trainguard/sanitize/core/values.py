"""Reading a tensor's values inside a check, by ``tensor.device.type``.

Checks that look at values (whether a loss is finite, whether gradients are all zero, a
parameter's sum) read them only where that is possible and cheap:

- ``cpu``: read at once (``.item()``, ``bool()``: about a microsecond);
- ``cuda``: a read waits for the GPU, so hot paths keep values on the device and copy them to
  pinned memory without blocking, read once the copy's CUDA event has completed (TG405's window of
  16 losses: one kernel per step); rare paths (a suspect already found) read directly, with a
  ``# note: a sync`` comment;
- any other device: the value checks are skipped. A ``meta`` tensor has no data at all (``.item()``
  raises "Tensor.item() cannot be called on meta tensors"; models are built there before
  ``to_empty()``/loading weights, https://pytorch.org/docs/stable/meta.html), and on lazy devices
  (``xla``, ``lazy``) a read forces the pending graph to run, which changes the run's timing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["READ_NOW", "READ_LATER", "reading", "readable", "as_bool", "as_float", "LossWindow",
           "DeviceLosses"]

READ_NOW = "cpu"
READ_LATER = "cuda"


def reading(tensor: Any) -> str:
    """How ``tensor``'s values may be read: :data:`READ_NOW` (``"cpu"``), :data:`READ_LATER`
    (``"cuda"``: without blocking, or directly on a rare path), or ``""`` (skip the value check)."""
    # (is_cpu/is_cuda: flags read without building a torch.device, on every step's loss)
    return READ_NOW if tensor.is_cpu else READ_LATER if tensor.is_cuda else ""


def readable(*tensors: Any) -> bool:
    """Whether every one of ``tensors`` lives on the CPU or a CUDA device (values can be read)."""
    return all(t.is_cpu or t.is_cuda for t in tensors)


def as_bool(tensor: Any) -> bool | None:
    """``bool(tensor)`` (one element), or None on a device whose values are not read."""
    return bool(tensor) if readable(tensor) else None


def as_float(tensor: Any) -> float | None:
    """``float(tensor)`` (one element), or None on a device whose values are not read."""
    return float(tensor) if readable(tensor) else None


class LossWindow:
    """The finiteness of up to ``SIZE`` consecutive losses of a device, kept on the device and
    read together: one kernel per step (``slot.add_(loss, alpha=0)``: 0 for a finite loss,
    NaN for NaN or Inf, since ``0 * inf`` is NaN), one non-blocking copy per window, read once
    the copy's event has completed. No step waits for the device."""

    SIZE = 16

    def __init__(self, device: Any) -> None:
        import torch

        self.device = device
        self.slots = torch.zeros(self.SIZE, dtype=torch.float32, device=device)
        self.steps: list[tuple[int, Any]] = []  # (optimizer step, backward line) per slot
        self.host: Any = None
        self.event: Any = None

    @property
    def full(self) -> bool:
        return len(self.steps) == self.SIZE

    def add(self, loss: Any, step: int, where: Any) -> None:
        self.slots[len(self.steps)].add_(loss.detach(), alpha=0)
        self.steps.append((step, where))

    def send(self) -> None:
        import torch

        if self.device.type == "cuda":
            self.host = torch.empty(self.SIZE, dtype=torch.float32, pin_memory=True)
            self.host.copy_(self.slots, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:  # (another device with readable values: read now)
            self.host = self.slots.cpu()

    def ready(self) -> bool:
        return self.event is None or self.event.query()

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()

    def first_non_finite(self) -> tuple[int, Any] | None:
        """(optimizer step, backward line) of the first non-finite loss of the window."""
        for (step, where), v in zip(self.steps, self.host.tolist()):
            if v != 0.0:
                return step, where
        return None


class DeviceLosses:
    """The losses of a device whose values are read later: :class:`LossWindow` s filled in
    turn, each sent when full, read once its copy has completed (at most 8 in flight: past
    that the oldest is waited for, the GPU being far behind)."""

    def __init__(self) -> None:
        self.window: LossWindow | None = None
        self.sent: list[LossWindow] = []

    def __bool__(self) -> bool:
        return self.window is not None or bool(self.sent)

    def add(self, loss: Any, step: int, where: Any) -> None:
        if self.window is not None and self.window.device != loss.device:
            self._send()
        if self.window is None:
            self.window = LossWindow(loss.device)
        self.window.add(loss, step, where)
        if self.window.full:
            self._send()

    def _send(self) -> None:
        if self.window is not None and self.window.steps:
            self.window.send()
            self.sent.append(self.window)
            if len(self.sent) > 8:
                self.sent[0].wait()
        self.window = None

    def first_non_finite(self) -> tuple[int, Any] | None:
        """(optimizer step, backward line) of the first non-finite loss among the windows read
        so far (those whose copy has completed); None when all were finite."""
        while self.sent and self.sent[0].ready():
            bad = self.sent.pop(0).first_non_finite()
            if bad is not None:
                return bad
        return None

    def flush(self) -> None:
        """Send the window being filled and wait for every copy (at the end of the run)."""
        self._send()
        for window in self.sent:
            window.wait()

    def clear(self) -> None:
        self.window, self.sent = None, []
