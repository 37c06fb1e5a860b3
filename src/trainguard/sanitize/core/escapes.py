"""Values made inside a re-enabled ``torch.enable_grad()`` block that leave it with a graph.

An evaluation routine under ``torch.no_grad()`` may re-enable grad for a part that needs it (an
input-gradient saliency map taken with ``torch.autograd.grad``). Whatever else the block computes
from the model's output also records a graph: ``probs = torch.softmax(logits, 1)`` written
inside the block carries a ``grad_fn`` (``SoftmaxBackward0``) and keeps its part of the graph
alive in whatever collects it, although no gradient is ever taken of it.

At the block's exit (:meth:`Escapes.block_exit`), the local variables of the frame that ran the
``with`` are read once: a tensor whose ``grad_fn`` is new since the block opened, that reaches a
parameter of a model, and whose graph no gradient has used (its nodes nearest the root still hold
their saved tensors: a graph ``autograd.grad`` ran through without ``retain_graph`` has freed
them) is followed. It *escapes* once its graph is seen alive while that frame is no longer running
(returned, stored in a list, or concatenated into a result); a local that dies with its frame
never escapes. An escaped value
that dies, or is alive at exit, with no backward or ``autograd.grad`` run through it is answered
by :meth:`Escapes.resolve`.

Cost: per block exit, one read of the frame's locals (64 at most) and a walk of at most
:data:`_NODES` nodes per new tensor; per resolve, one look at the stack per value followed (at
most :data:`_KEEP` values).

Reference: https://pytorch.org/docs/stable/generated/torch.enable_grad.html;
Lightning-AI/pytorch-lightning#15925 (``torch.enable_grad()`` in a prediction step).
"""

from __future__ import annotations

import sys
from typing import Any

from trainguard.sanitize.core.graph import graph_nodes

__all__ = ["Escapes", "grad_fn_ids"]

_LOCALS = 64  # local variables read at a block's exit
_NODES = 256  # nodes walked to find a parameter behind a value
_FRONT = 16  # nodes looked at near the root to tell a used graph
_KEEP = 64  # values followed at once


def grad_fn_ids(frame: Any) -> set[int]:
    """Ids of the ``grad_fn`` of the tensors ``frame`` holds in its locals now."""
    import torch

    out = set()
    for value in list(frame.f_locals.values())[:_LOCALS]:
        if isinstance(value, torch.Tensor) and value.grad_fn is not None:
            out.add(id(value.grad_fn))
    return out


def _saved(node: Any) -> bool | None:
    """Whether ``node``'s saved tensors are readable (True) or freed by a backward (False);
    None when it saves none (sizes and dims are no tensors)."""
    import torch

    found = None
    for attr in dir(node):
        if attr.startswith("_saved_"):
            try:
                value = getattr(node, attr)
                if isinstance(value, torch.Tensor) or isinstance(value, tuple) and any(
                        isinstance(v, torch.Tensor) for v in value):
                    found = True
            except RuntimeError as exc:
                if "freed" in str(exc):
                    return False
            except Exception:
                continue
    return found


def _used(node: Any) -> bool:
    """Whether a backward or ``autograd.grad`` already ran through ``node``'s graph: its nodes
    nearest the root that save tensors (up to :data:`_FRONT` looked at) had them freed. Ops
    added on top of a used graph (``softmax`` of logits after their gradient) are not used."""
    frontier, seen = [node], 0
    while frontier and seen < _FRONT:
        n = frontier.pop()
        seen += 1
        state = _saved(n)
        if state is False:
            return True
        if state is None:
            frontier.extend(c for c, _ in getattr(n, "next_functions", ()) if c is not None)
    return False


def _reaches_parameter(node: Any) -> bool:
    from torch import nn

    for n in graph_nodes(node, limit=_NODES):
        if isinstance(getattr(n, "variable", None), nn.Parameter):
            return True
    return False


def _running(frame_id: int, code: Any) -> bool:
    """Whether the frame ``frame_id`` (running ``code``) is on the current stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if id(frame) == frame_id and frame.f_code is code:
            return True
        frame = frame.f_back
    return False


class _Value:
    __slots__ = ("track", "frame_id", "code", "key", "escaped")

    def __init__(self, track: Any, frame: Any, key: Any) -> None:
        self.track = track
        self.frame_id, self.code = id(frame), frame.f_code
        self.key = key
        self.escaped = False


class Escapes:
    """The values followed for one check (see the module doc)."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.values: list[_Value] = []

    def __bool__(self) -> bool:
        return bool(self.values)

    def block_exit(self, frame: Any, before: set[int], skip: set[int], key: Any) -> None:
        """Follow the new graph-carrying locals of ``frame`` at a block's exit; ``before``: the
        ``grad_fn`` ids its locals held when the block opened; ``skip``: those of outputs
        followed otherwise (a model's output, judged on its own); ``key(name, tensor)``: what
        :meth:`resolve` answers for it."""
        import torch

        for name, value in list(frame.f_locals.items())[:_LOCALS]:
            if not isinstance(value, torch.Tensor) or value.grad_fn is None:
                continue
            node = value.grad_fn
            if id(node) in before or id(node) in skip or _used(node) or \
                    not _reaches_parameter(node):
                continue
            track = self.state.track_graph(value, info=None)
            if track is not None:
                self.values.append(_Value(track, frame, key(name, value)))
        if len(self.values) > _KEEP:
            for v in self.values[:-_KEEP]:
                v.track.release()
            del self.values[:-_KEEP]

    def resolve(self, *, final: bool = False) -> list[Any]:
        """The keys of escaped values that died, or (``final``) are alive, unreached."""
        out, keep = [], []
        for v in self.values:
            alive = v.track.alive  # its node: held by the tensor or by a graph built on it
            if not v.track.reached and alive and not v.escaped:
                v.escaped = final or not _running(v.frame_id, v.code)
            if v.track.reached or not alive or final:
                if v.escaped and not v.track.reached:
                    out.append(v.key)
                v.track.release()
            else:
                keep.append(v)
        self.values = keep
        return out
