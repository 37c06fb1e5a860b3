"""A clamp meant to keep a value off a singular point whose margin the dtype rounds away (TG405).

``p.clamp(eps, 1 - eps)`` before ``log(p)`` and ``log(1 - p)`` guards a loss only when ``1 - eps``
differs from 1.0 in ``p``'s dtype: in float32 the spacing next to 1.0 is 6e-8, so ``1 - 1e-8``
(and ``1 - 1e-10``) is stored as 1.0 and a saturated ``p`` stays at exactly 1 (``log(1 - p)`` is
``-inf``); likewise ``clamp(min=1e-50)`` is ``clamp(min=0)`` in float32, and ``1e-8`` is 0 in
float16. Autograd keeps the proof: a ``ClampBackward1`` (``ClampMinBackward0``,
``ClampMaxBackward0``) node saves the bounds as given (Python floats) and its input, so the
bound's value in the input's dtype and whether the input reached it can be read off the graph.

Used once, after a loss op's saved input was found at its singular point (:func:`~trainguard.
sanitize.core.nonfinite.singular_node`): the clamps below that op (up to the models' outputs)
are searched for one whose bound is 0 or +-1 only by rounding, with input values at or beyond
it. Its node is then the one whose line is the finding's place (the clamp, not the log).

Reference: https://pytorch.org/docs/stable/type_info.html (``torch.finfo``: ``eps``, ``tiny``);
snipsco/ntm-lasagne#20 ("1. - 1e-10 == 1.").
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.graph import graph_nodes

__all__ = ["lost_margin"]

_NODES = 64  # nodes below the singular op searched at most
_CLAMPS = {"ClampBackward1": ("_saved_min", "_saved_max"), "ClampMinBackward0": ("_saved_min",),
           "ClampMaxBackward0": ("_saved_max",)}
_SINGULAR = (0.0, 1.0, -1.0)  # the points log, division, acos/asin must be kept off


def lost_margin(node: Any, stop: Any = None) -> tuple[Any, str] | None:
    """``(clamp node, clause)`` for a clamp in the graph below ``node`` (walk ending where
    ``stop(node)``) with a bound that is 0 or +-1 in its input's dtype only by rounding
    (``1 - 1e-8`` in float32) and an input that reached that bound; None when there is none."""
    import torch

    below = [n for n, _ in node.next_functions if n is not None]
    if type(node).__name__ == "DivBackward0":  # only the denominator's side
        below = below[1:] if len(node.next_functions) > 1 and node.next_functions[1][0] else []
    for current in (n for start in below for n in graph_nodes(start, limit=_NODES, stop=stop)):
        attrs = _CLAMPS.get(type(current).__name__)
        if attrs is None:
            continue
        try:
            x = current._saved_self
        except Exception:  # freed by an earlier backward
            continue
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or not x.numel() \
                or x.device.type != "cpu":
            continue
        for attr in attrs:
            bound = getattr(current, attr, None)
            if not isinstance(bound, float) or bound in _SINGULAR:
                continue
            stored = torch.tensor(bound, dtype=x.dtype).item()
            if stored not in _SINGULAR:
                continue
            reached = x >= stored if attr == "_saved_max" else x <= stored
            if bool(reached.any()):
                kind = "upper" if attr == "_saved_max" else "lower"
                return current, (
                    f"; that input comes from a clamp whose {kind} bound {bound!r} is "
                    f"{stored!r} in {str(x.dtype).replace('torch.', '')} (the epsilon is below "
                    f"the dtype's resolution there), so the clamped values sit on the op's "
                    f"singular point (an epsilon of at least torch.finfo(dtype).eps keeps them "
                    f"off it; or compute in log space: F.logsigmoid, "
                    f"F.binary_cross_entropy_with_logits)")
    return None
