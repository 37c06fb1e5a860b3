"""TG201 graph-kept-across-steps: graphs of earlier steps kept alive by an accumulator.

What it watches: every backward root (the loss) and every outermost module output that carries a
``grad_fn``. Their root nodes are stamped with the optimizer step they were made in, and followed
without being kept alive (:class:`~trainguard.sanitize.state.GraphTrack`).

When it fires: after an optimizer step (or at exit, for a run without steps, counting outermost
forwards instead), graphs made at three or more distinct earlier iterations, each at least two
iterations old, are all still alive. Something holds them: ``total += loss``,
``losses.append(loss)``, ``preds.append(out)``. The finding names the variable found in the user's
frames that holds them and points at the line that accumulates into it (else at the line that made
the oldest graph).

Silent on: a list of losses summed and backpropagated in the same iteration (graphs die at the end
of the step); gradient accumulation over micro-batches (one optimizer step); one output kept for
later (one graph is not a growing leak); accumulating ``loss.item()`` or ``loss.detach()``.

Reference: PyTorch FAQ, "My model reports cuda runtime error(2): out of memory" — "Don't accumulate
history across your training loop" (https://pytorch.org/docs/stable/notes/faq.html).
"""

from __future__ import annotations

import sys
from typing import Any

from trainguard.sanitize.checks import Check
from trainguard.sanitize.holders import accumulation_line, find_holder, stamp
from trainguard.sanitize.state import BackwardCall, ForwardCall, GraphTrack, first_tensor

_MIN_ITERATIONS = 3  # distinct old iterations whose graphs are alive at once
_MIN_AGE = 2         # iterations a graph must have outlived


class GraphKeptAcrossSteps(Check):
    code = "TG201"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.tracks: list[GraphTrack] = []

    def _clock(self) -> int:
        return self.state.step if self.state.step else self.state.root_forwards

    def _track(self, tensor: Any, where: Any, what: str) -> None:
        node = getattr(tensor, "grad_fn", None)
        if node is None:
            return
        clock = self._clock()
        stamp(node, clock)
        track = self.state.track_graph(tensor, info=(clock, where, what))
        if track is not None:
            self.tracks.append(track)

    def on_backward(self, call: BackwardCall) -> None:
        for tensor in call.tensors[:1]:
            self._track(tensor, call.where, "backward root")

    def on_root_forward(self, call: ForwardCall) -> None:
        if call.grad_enabled and not self.state.in_backward:
            for tensor in first_tensor(call.output, limit=1):
                self._track(tensor, call.where, f"output of {type(call.module).__name__}")

    def on_step(self, optimizer: Any) -> None:
        self._inspect()

    def on_exit(self) -> None:
        self._inspect()

    def _inspect(self) -> None:
        clock = self._clock()
        self.tracks = [t for t in self.tracks if t.alive]
        old = [t for t in self.tracks if t.info[0] <= clock - _MIN_AGE]
        ages = {t.info[0] for t in old}
        if len(ages) < _MIN_ITERATIONS:
            if len(self.tracks) > 512:
                for t in self.tracks[:-512]:
                    t.release()
                del self.tracks[:-512]
            return
        unit = "optimizer step" if self.state.step else "forward"
        oldest = min(old, key=lambda t: t.info[0])
        limit = clock - _MIN_AGE
        held = find_holder(lambda stamps: sum(1 for s in stamps if s <= limit) >= _MIN_ITERATIONS,
                           sys._getframe(1))
        where = oldest.info[1]
        seen = (f"the graphs of {len(ages)} earlier {unit}s (from {unit} {min(ages)} on) are "
                f"still alive at {unit} {clock}")
        if held is not None:
            frame, name, kind = held
            line = accumulation_line(frame.f_code, name)
            if line is not None:
                where = line
            holder = f"`{name}` holds them" + (" (a tensor that keeps a grad_fn)" if kind == "tensor"
                                               else " (tensors with grad_fn)")
            message = f"{seen}: {holder}, so every step's graph and activations stay in memory"
        else:
            message = (f"{seen}, first made by the {oldest.info[2]} here: something keeps these "
                       "tensors with their grad_fn across iterations, so memory grows every step")
        # Release what was seen so the same graphs are not counted again.
        for t in old:
            t.release()
        self.tracks = [t for t in self.tracks if t.active]
        self.report(message, where=where, iterations=sorted(ages)[:8], clock=clock)
