"""A non-finite loss whose target already held NaN/Inf: the data, not the model (TG405).

A loss module or functional loss given a finite prediction and a target holding NaN or Inf (a
regression label missing in the table and read as NaN, an ``inf`` sentinel) returns NaN/Inf: no
op of the model or of the loss is at fault, and no epsilon helps. The loss call's arguments
prove it: the target needs no gradient and is non-finite. Read only when the loss's value is
already non-finite (one test of the target), so a healthy step costs nothing more.

Reference: https://pytorch.org/docs/stable/generated/torch.isfinite.html;
TencentAILabHealthcare/scPROTEIN#3 (regression labels with NaN entries).
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.graph import graph_nodes

__all__ = ["DATA_FIX", "bad_target", "data_cause"]

DATA_FIX = ("check the dataset for NaN/Inf targets (torch.isfinite(target).all()) and clean, "
            "impute or drop those samples (or mask them out of the loss)")
"""The fix when the target holds NaN/Inf."""

_NODES = 64  # nodes of a backward root's graph searched for the loss at most


def bad_target(call: Any) -> tuple[Any, str] | None:
    """For a loss call whose output is already known to be non-finite: ``(weak reference to
    the output, clause)`` when its target is a CPU floating tensor that needs
    no gradient and holds NaN/Inf, else None."""
    import torch

    target = call.target
    if not isinstance(target, torch.Tensor) or not target.is_floating_point() \
            or target.requires_grad or target.device.type != "cpu" or not target.numel() \
            or target.layout != torch.strided:
        return None
    try:
        bad = int((~torch.isfinite(target)).sum())
    except Exception:  # (a tensor subclass without the op: nothing is said)
        return None
    if not bad:
        return None
    return weakref.ref(call.output), (
        f"; the target given to {call.name} at {short_location(call.where)} already holds "
        f"NaN/Inf ({bad} of {target.numel()} values): the data, not the model or the loss "
        f"computation, is non-finite")


def data_cause(held: tuple[Any, str] | None, root: Any) -> str | None:
    """The clause of :func:`bad_target`'s finding when that loss is ``root`` or is in
    ``root``'s graph (``total = a + b``), else None."""
    loss = held[0]() if held is not None else None
    if loss is None:
        return None
    if loss is not root:
        node = loss.grad_fn
        if node is None or root is None or root.grad_fn is None or not any(
                n is node for n in graph_nodes(root.grad_fn, limit=_NODES)):
            return None
    return held[1]
