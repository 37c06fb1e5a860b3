"""TG203 retain-graph-leak: ``retain_graph=True`` where no later backward of the step needs it.

What it watches: each ``backward(retain_graph=True)`` (not ``create_graph``). After it returns, the
nodes of its graph (up to 512, leaves excluded) get a no-op pre-hook that notes when a later
backward runs through them. The graph's trunk is its earliest-made outermost module output (the
watcher stamps those); the next call of that module from the same line starts the next iteration.

When it fires: the next iteration starts (or the run ends, or, for graphs with no module output,
the optimizer steps), no later backward went through the retained graph, and none ran before the
next optimizer step (the retained backward was its step's last, as the catalogue defines the
pitfall): ``retain_graph=True`` kept the step's saved activations alive past the step for
nothing. When a carried tensor (an RNN state) links the iterations, later backwards run through
ever longer retained graphs: memory and time grow every step. Reported at the backward line.

Silent on: two losses through one graph with ``retain_graph=True`` on the first; a later
backward of another graph feeding the same step (a WGAN-GP critic's ``pen.backward(
retain_graph=True)`` then ``loss_d.backward()``, sdv-dev/CTGAN#37); GANs whose
generator output is backpropagated again by the generator's loss in the same iteration;
``create_graph=True`` (higher-order gradients).

Cost: per checked backward with ``retain_graph``, 512 nodes of its graph hooked at most; per
forward and step while such graphs are followed, one pass over them.

Reference: ``torch.Tensor.backward`` docs ("retain_graph ... in nearly all cases setting this option
to True is not needed and often can be worked around in a much more efficient way")
(https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html); forum thread
https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795
(retain_graph=True suggested as the fix for a carried RNN state).
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.records import MADE, BackwardCall, ForwardCall

_MAX_NODES = 512


class _Retained:
    __slots__ = ("where", "step", "trunk", "handles", "reached", "stepped", "__weakref__")

    def __init__(self, where: Any, step: int, trunk: Any) -> None:
        self.where = where
        self.step = step
        self.trunk = trunk  # (where, module name) of the earliest-made module output, or None
        self.handles: list[Any] = []
        self.reached = False  # a later backward went through the graph, or fed the same step
        self.stepped = False  # an optimizer stepped since

    def __call__(self, grad_outputs: Any) -> None:
        self.reached = True
        return None

    def release(self) -> None:
        for handle in self.handles:
            try:
                handle.remove()
            except Exception:  # the node is gone already
                pass
        self.handles.clear()


class RetainGraphLeak(Check):
    code = "TG203"
    stamps = "outputs"
    on_demand = ("on_root_forward", "on_step")  # only while a retained graph is followed

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.retained: list[_Retained] = []

    def on_backward_done(self, call: BackwardCall) -> None:
        for record in self.retained:  # a later backward before the step: not its last one
            record.reached = record.reached or not record.stepped
        if not call.retain_graph or call.create_graph or not call.tensors:
            return
        nodes, stamps, seen = [], [], set()
        frontier = [t.grad_fn for t in call.tensors if t.grad_fn is not None]
        while frontier and len(nodes) < _MAX_NODES:
            node = frontier.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if type(node).__name__ == "AccumulateGrad":
                continue
            nodes.append(node)
            meta = node.metadata
            if MADE in meta:
                stamps.append(meta[MADE])
            frontier.extend(n for n, _ in node.next_functions if n is not None)
        trunk = min(stamps, key=lambda s: (s.backward_count, s.order)) if stamps else None
        record = _Retained(call.where, call.step, (trunk.where, trunk.module) if trunk else None)
        record.handles = [node.register_prehook(record) for node in nodes]
        self.retained.append(record)
        self.arm()

    def on_root_forward(self, call: ForwardCall) -> None:
        if not self.retained:
            return
        here = (call.where, type(call.module).__name__)
        self._settle([r for r in self.retained if r.trunk == here])

    def on_step(self, optimizer: Any) -> None:
        for record in self.retained:
            record.stepped = True
        self._settle([r for r in self.retained if r.trunk is None])

    def on_exit(self) -> None:
        self._settle(list(self.retained))

    def _settle(self, records: list[_Retained]) -> None:
        self._report_settled(records)
        if not self.retained:
            self.disarm()

    def _report_settled(self, records: list[_Retained]) -> None:
        for record in records:
            record.release()
            self.retained.remove(record)
            if record.reached:
                continue
            trunk = (f", which starts at {record.trunk[1]}'s output" if record.trunk else "")
            self.report(
                f"backward(retain_graph=True) kept this graph{trunk} alive past optimizer step "
                f"{record.step + 1}, but no later backward of that step went through it: its saved "
                "activations stay in memory, and grow every step if the graph is carried on",
                fix="drop retain_graph=True; if a tensor is carried to the next iteration, "
                    "detach it (hidden = hidden.detach())",
                where=record.where)
