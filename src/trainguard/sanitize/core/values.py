"""Reading a tensor's values inside a check, by ``tensor.device.type``.

Checks that look at values (whether a loss is finite, whether gradients are all zero, a
parameter's sum) read them only where that is possible and cheap:

- ``cpu``: read at once (``.item()``, ``bool()``: about a microsecond);
- ``cuda``: a read waits for the GPU, so hot paths copy a flag to pinned memory without blocking and
  read it once its CUDA event has completed (TG405); rare paths (a suspect already found) read
  directly, with a ``# note: a sync`` comment;
- any other device: the value checks are skipped. A ``meta`` tensor has no data at all (``.item()``
  raises "Tensor.item() cannot be called on meta tensors"; models are built there before
  ``to_empty()``/loading weights, https://pytorch.org/docs/stable/meta.html), and on lazy devices
  (``xla``, ``lazy``) a read forces the pending graph to run, which changes the run's timing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["READ_NOW", "READ_LATER", "reading", "readable", "as_bool", "as_float"]

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
