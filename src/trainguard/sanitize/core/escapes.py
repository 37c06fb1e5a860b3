"""Values made inside a re-enabled ``torch.enable_grad()`` block that leave it with a graph.

An evaluation routine under ``torch.no_grad()`` may re-enable grad for a part that needs it (an
input-gradient saliency map taken with ``torch.autograd.grad``). Whatever else the block computes
from the model's output also records a graph: ``probs = torch.softmax(logits, 1)`` written
inside the block carries a ``grad_fn`` (``SoftmaxBackward0``) and keeps its part of the graph
alive in whatever collects it, although no gradient is ever taken of it.

At the block's exit (:meth:`Escapes.block_exit`), the local variables of the frame that ran the
``with`` are read once: a tensor whose ``grad_fn`` is new since the block opened, that reaches a
parameter of a model (or the root of a value an earlier exit of the block let out: an iterate
the caller feeds back, :meth:`Escapes._chained`), and whose graph no gradient has used (its
nodes nearest the root still hold their saved tensors: a graph ``autograd.grad`` ran through
without ``retain_graph`` has freed them) is followed. It *escapes* once its graph is seen alive
while that frame is no longer running (returned, stored in a list, or concatenated into a
result); a local that dies with its frame never escapes. An escaped value
that dies, or is alive at exit, with no backward or ``autograd.grad`` run through it is answered
by :meth:`Escapes.resolve`.

Cost: per block exit, one read of the frame's locals (64 at most) and a walk of at most
:data:`_NODES` nodes per new tensor (two for one that reaches no parameter); per resolve, one
look at the stack per value followed (at most :data:`_KEEP` values).

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
        self.seeds: list[tuple[int, Any, Any]] = []  # (id(root), code, track): see _chained

    def __bool__(self) -> bool:
        return bool(self.values)

    def block_exit(self, frame: Any, before: set[int], skip: set[int], key: Any) -> None:
        """Follow the new graph-carrying locals of ``frame`` at a block's exit; ``before``: the
        ``grad_fn`` ids its locals held when the block opened; ``skip``: those of outputs
        followed otherwise (a model's output, judged on its own); ``key(name, tensor)``: what
        :meth:`resolve` answers for it."""
        import torch

        found, chained = [], []
        for name, value in list(frame.f_locals.items())[:_LOCALS]:
            if not isinstance(value, torch.Tensor) or value.grad_fn is None:
                continue
            node = value.grad_fn
            if id(node) in before or id(node) in skip or _used(node):
                continue
            if _reaches_parameter(node):
                found.append((name, value))
            elif self._chained(value, frame.f_code):
                chained.append((name, value))
        # (of the chained values, only the outermost: ``img`` cloned in the block is part of
        # the updated image's graph and leaves only through it)
        inner = {id(n) for _, v in chained for n in list(graph_nodes(v.grad_fn, limit=_NODES))[1:]}
        for name, value in found + [(n, v) for n, v in chained if id(v.grad_fn) not in inner]:
            track = self.state.track_graph(value, info=None)
            if track is not None:
                self.values.append(_Value(track, frame, key(name, value)))
        if len(self.values) > _KEEP:
            for v in self.values[:-_KEEP]:
                v.track.release()
            del self.values[:-_KEEP]

    def _chained(self, value: Any, code: Any) -> bool:
        """Whether ``value``'s graph holds the root of a value an earlier exit of a block run by
        ``code`` let out (an image updated inside the block, fed back in by the caller's loop:
        the graph grows by one block per call); else ``value`` is noted as such a root. A root
        is matched by id only while it is alive (its id cannot be reused meanwhile)."""
        roots = {i for i, c, t in self.seeds if c is code and t.alive}
        if roots and any(id(n) in roots for n in graph_nodes(value.grad_fn, limit=_NODES)):
            return True
        track = self.state.track_graph(value, info=None)
        if track is not None:
            self.seeds.append((id(value.grad_fn), code, track))
        for _, _, t in self.seeds[:-_KEEP]:
            t.release()
        del self.seeds[:-_KEEP]
        return False

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
