"""Taking a ``TorchFunctionMode`` the sanitizer pushed off torch's mode stack, wherever it is.

``TorchFunctionMode.__exit__`` pops the top of the stack, whatever mode that is. A mode the
sanitizer enters at one event and leaves at a later one may not be on top then: the user may have
pushed one of their own above it, and while torch runs a mode's ``__torch_function__`` it takes
that mode off the stack and puts it back afterwards (``torch.overrides._pop_mode_temporarily``),
so an event raised inside a dispatched call (``Tensor.backward`` goes through
``handle_torch_function``) does not find it at all. A mode left behind would run a Python call
for every torch op for the rest of the process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["remove_mode"]


def remove_mode(mode: Any) -> bool:
    """Remove ``mode`` from the torch-function mode stack, putting back the modes above it in
    their order. Returns False, changing nothing, when ``mode`` is not on the stack (not entered,
    already left, or held off it by torch during its own ``__torch_function__``)."""
    import torch

    try:
        depth = torch._C._len_torch_function_stack()
        if not any(torch._C._get_function_stack_at(i) is mode for i in range(depth)):
            return False
        above = []
        while (top := torch._C._pop_torch_function_stack()) is not mode:
            above.append(top)
        for other in reversed(above):
            torch._C._push_on_torch_function_stack(other)
        return True
    except (RuntimeError, AttributeError):  # a torch without these internals: leave it
        return False
