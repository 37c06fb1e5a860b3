"""Outputs a model hands out whole that the loss then leaves out: chosen by the caller, not cut.

Used by TG205 once a module's output was seen not to reach the loss. A model that returns that
output with its graph (deep supervision returning one prediction per resolution, a weight of 0
dropping the coarsest: MIC-DKFZ/nnUNet#1417) leaves the choice of what to train to the code that
builds the loss; when that code never reads the output (no op takes it), nothing cut the path:
the output was left out on purpose. Checked on the model's next call: when the module's output
node lies in the graph of a tensor it returns, those tensors are followed
(:func:`~trainguard.sanitize.core.cuts.cut_trace`) until the optimizer's next step. Any op that
computes from them (a loss later rebuilt as a new leaf by ``torch.tensor([...])``) or cuts them
(``.detach()``, ``.item()``, ``.numpy()``, ``argmax``, an op under ``no_grad``) keeps the finding;
so does a trace that ran out of ops or never ended. An output dropped inside the model's own
``forward`` (never returned) is not in its returned graph and stays a finding. A known limit: an
auxiliary output that the training code forgets to add to the loss (never read) is silent too.

Cost: one graph walk of the model's outputs (bounded), once; one Python call per torch op from
the model's return to the next step, once.
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.cuts import cut_trace
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.modestack import remove_mode
from trainguard.sanitize.core.tracing import tensors

__all__ = ["HandedOut", "settle"]


class HandedOut:
    """Follow what ``root``'s next call returns of ``module``'s output until :meth:`close`."""

    def __init__(self, root: Any, module: Any) -> None:
        self.node: Any = None  # the grad_fn of ``module``'s output in the root's next call
        self.mode: Any = None
        self.count = 0  # tensors followed when the trace began
        self.dropped = False  # handed out and never read: set by close()
        self.returned = False  # the model's next call has returned (the trace began)
        self.handles = [module.register_forward_hook(self._made),
                        root.register_forward_hook(self._returned)]

    def _made(self, module: Any, inputs: Any, output: Any) -> None:
        self.handles.pop(0).remove()
        out = tensors(output)
        self.node = out[0].grad_fn if out else None

    def _returned(self, module: Any, inputs: Any, output: Any) -> None:
        for handle in self.handles:
            handle.remove()
        self.returned = True
        if self.node is None:
            return
        try:
            budget = Budget(GRAPH_NODES)
            followed = [t for t in tensors(output) if t.grad_fn is not None and any(
                n is self.node for n in graph_nodes(t.grad_fn, budget=budget))]
            if followed and not budget.spent:
                mode = cut_trace(followed)
                mode.__enter__()
                self.mode, self.count = mode, len(mode.derived)
        except Exception:
            self.mode = None
        self.node = None

    def close(self, judge: bool = True) -> None:
        """End the trace; with ``judge``, note whether the output was dropped, never cut."""
        for handle in self.handles:
            handle.remove()
        mode, self.mode = self.mode, None
        if mode is None or not remove_mode(mode):
            return
        # never read: nothing computed from the outputs, nothing cut from them
        self.dropped = judge and len(mode.derived) == self.count and not mode.seen \
            and not mode.cuts and mode.ops < mode.limit


def settle(pending: list) -> list:
    """Close the traces of ``pending`` ``(suspects, module, HandedOut)`` whose model call has
    returned (the step of the call judged comes first: those wait); the parameters behind an
    output dropped count as trained (``suspects.got``). Returns those still open."""
    for suspects, module, handed in pending:
        if handed.returned:
            handed.close()
        if handed.dropped:
            suspects.got.update(id(p) for p in module.parameters())
    return [h for h in pending if not h[2].returned]
