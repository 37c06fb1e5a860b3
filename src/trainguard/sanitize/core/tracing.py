"""What the sanitizer's op tracers share: a bounded ``TorchFunctionMode`` and its holder.

A tracer (``cuts``, ``terms``, ``number_cuts``, ``node_lines``) follows every torch op of one
call or one cycle to name a line that a check already knows is at fault. Each op runs as given
(its result is returned unchanged: numerics never change); after it, the tracer's ``_follow``
looks at the op, at most ``limit`` times, and a failure in it stops the trace instead of
reaching the user's code. :class:`TraceSlot` holds a tracer entered at one event and closes it
at a later one, taking it off torch's mode stack wherever it is (see ``core/modestack.py``).

Reference: ``torch.overrides.TorchFunctionMode``
(https://pytorch.org/docs/stable/notes/extending.html#extending-all-torch-api-with-modes).
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

from trainguard.sanitize.core.frames import Location, user_location
from trainguard.sanitize.core.modestack import remove_mode

__all__ = ["bounded_mode", "tensors", "op_name", "TraceSlot", "ArrayMarks"]

@cache  # made on first use: torch is imported lazily
def bounded_mode() -> type:
    """The base class of the tracers: a ``TorchFunctionMode`` that runs each op as given, then
    calls ``self._follow(func, args, kwargs, out)`` for the first ``limit`` ops (a class
    attribute); an exception in ``_follow`` ends the following, and so does ``stop()``."""
    from torch.overrides import TorchFunctionMode

    class BoundedMode(TorchFunctionMode):
        limit = 0  # ops followed at most

        def __init__(self) -> None:
            super().__init__()
            self.ops = 0

        def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                               kwargs: dict | None = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if self.ops < self.limit:
                self.ops += 1
                try:
                    self._follow(func, args, kwargs or {}, out)
                except Exception:  # the user's code must never see the trace fail
                    self.ops = self.limit
            return out

        def _follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
            raise NotImplementedError

        def caller(self) -> Location | None:
            """The user's line that called the op (only from ``_follow``)."""
            return user_location(sys._getframe(3))

        def stop(self) -> None:
            self.ops = self.limit

    return BoundedMode


def tensors(value: Any, *, dicts: bool = True) -> list[Any]:
    """The tensors in ``value``, one level into tuples, lists and (with ``dicts``) dicts."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    if dicts and isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, torch.Tensor)]
    return []


class ArrayMarks:
    """NumPy arrays a tracer marked (``x.detach().numpy()``), by their data address:
    ``torch.from_numpy`` is not seen by a ``TorchFunctionMode`` (it is among
    ``torch.overrides.get_ignored_functions()``), but the tensor it makes shares the array's
    memory, so a later op given that tensor carries the array's mark. Weak references: an
    address is trusted only while its array lives (``from_numpy`` keeps it alive). With
    ``alike``, a tensor with no graph made from another array of a marked array's shape (a
    NumPy op between: ``torch.from_numpy(np.clip(p.detach().numpy(), 0, 1))``) carries its
    mark too."""

    LIMIT = 1024

    def __init__(self) -> None:
        self.marks: dict[int, tuple[Any, Any]] = {}
        self.shapes: dict[tuple[int, ...], Any] = {}  # the first mark of each shape marked

    def add(self, array: Any, mark: Any) -> None:
        from weakref import ref

        try:
            if getattr(array, "size", 0) and len(self.marks) < self.LIMIT:
                self.marks[array.__array_interface__["data"][0]] = (ref(array), mark)
                self.shapes.setdefault(tuple(array.shape), mark)  # (kept past the array)
        except (TypeError, AttributeError, KeyError):  # (no weak references, no buffer)
            pass

    def of(self, t: Any, *, alike: bool = False) -> Any:
        """The mark of the array whose memory the CPU tensor ``t`` shares, else None."""
        if not self.marks:
            return None
        try:
            found = self.marks.get(t.data_ptr()) if t.device.type == "cpu" else None
            if found is None and alike and t.device.type == "cpu" and t.grad_fn is None and \
                    not t.requires_grad and t.dim() and t.numel() > 1:
                return self.shapes.get(tuple(t.shape))
        except Exception:  # (a tensor without storage)
            return None
        return found[1] if found is not None and found[0]() is not None else None

    def clear(self) -> None:
        self.marks.clear()
        self.shapes.clear()


def op_name(func: Any) -> str:
    """The name of the op a mode was given (``data`` for a read of ``x.data``)."""
    name = getattr(func, "__name__", "") or ""
    if name == "__get__":  # a property read: `x.data`
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return name


class TraceSlot:
    """Holds one tracer (``trace``, with a ``clear()`` that drops what it holds) between the
    events that enter and close it."""

    trace: Any = None
    leftover: Any = None  # a closed tracer still on torch's mode stack

    def close(self) -> None:
        """End the trace: it stops following ops at once and drops what it holds; it leaves
        torch's mode stack now, or, when this runs inside the tracer's own
        ``__torch_function__`` (a ``backward()`` call is dispatched through it, and torch takes
        the mode off the stack for that call and puts it back after), at the next
        :meth:`settle`."""
        trace, self.trace = self.trace, None
        if trace is not None:
            trace.stop()
            trace.clear()
            self.leftover = trace
        self.settle()

    def settle(self) -> None:
        """Take a closed tracer off torch's mode stack, wherever it is in it (modes pushed above
        it are put back in their order); a no-op while torch holds it off the stack."""
        if self.leftover is not None and remove_mode(self.leftover):
            self.leftover = None
