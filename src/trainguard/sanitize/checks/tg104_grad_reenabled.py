"""TG104 grad-reenabled: ``torch.enable_grad()`` inside an evaluation region builds graphs again.

What it watches: outermost module calls made with grad mode on while a ``torch.no_grad()`` block is
open (the watcher counts them): grad mode was turned back on inside it, by ``torch.enable_grad()``
(whose line the watcher notes) or ``torch.set_grad_enabled(True)``; and outermost calls made with
grad mode off inside such a block whose ``forward`` turned it back on itself (``with
torch.enable_grad():`` in ``forward``, ngxbac/GAIN#5); and the losses computed with grad turned
back on inside such a block (a bare ``torch.set_grad_enabled(True)`` left on after the forward
that needed it, Lightning-AI/pytorch-lightning#10287). Their outputs that carry a ``grad_fn`` are
followed without keeping them alive.

When it fires: those outputs die, or the run ends, without any backward reaching them: the
evaluation region computed graphs (and kept activations) for nothing. Also for a value that a
user's ``with torch.enable_grad():`` block in a ``no_grad`` region computed from a model's output
and that leaves the block's function with its graph, unreached (``probs = torch.softmax(logits,
1)`` beside the saliency gradient taken of ``logits``, then returned: ``core/escapes.py``), even
where the block's own ``torch.autograd.grad`` silences its forward, and for an iterate updated in
the block from its input gradient that the caller's ``no_grad`` loop feeds back (its graph holds
the previous call's: deepinv/deepinv#548); reported, when that block
takes a gradient itself (it needs grad), at the value's last assignment in the block (the line
to move out), else at the block. Reported at the cause: the
``enable_grad``/``set_grad_enabled(True)`` line, or for a function decorated with
``@torch.enable_grad()``/``@torch.set_grad_enabled(True)`` the decorator's line (the watcher notes
where user code turns grad mode back on inside a ``no_grad`` block); at the model call when no
such line is known. A value whose graph a ``torch.autograd.grad`` call in the region kept, with
``create_graph=True`` or ``retain_graph=True`` (an energy and the forces derived from it, left
with their graphs by a potential evaluated under ``no_grad``: fairchem#199, schnetpack#250), is
reported at that call: the re-enabling is needed for the gradient, the kept graph is not.

Silent on: re-enabled regions where a backward or ``torch.autograd.grad`` does reach the outputs
(input gradients, saliency, test-time optimisation); re-enabled regions where a backward runs at
all (a linear probe trained on frozen embeddings inside a ``no_grad`` validation, whose last
prediction keeps a graph: GRACE's evaluator, determined-ai/determined#7043) or whose own
code (not a model's ``forward``) calls ``torch.autograd.grad`` without ``create_graph`` (an
adversarial test step's input gradient, whose attacked forward builds a graph no one uses:
Lightning-AI/pytorch-lightning#2427; a gradient taken inside a user ``enable_grad()`` block of its
own nested in the region does not count: that helper did not need the outer re-enabling,
pyro-ppl/pyro#1914); also inside the forward before it returns (an energy whose
graph ``autograd.grad`` for the forces already freed); ``requires_grad_(True)`` under ``no_grad``
(it creates no graph); forwards in PyTorch's own re-enabled regions (LBFGS closures run no
``no_grad`` block of the user's).

Cost: per checked outermost forward with grad re-enabled, its output's first 4 tensors followed
(256 at most, ``Unreached``); resolved at each forward and at exit.

Reference: ``torch.enable_grad`` docs
(https://pytorch.org/docs/stable/generated/torch.enable_grad.html); autograd notes "Locally
disabling gradient computation"
(https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation).
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.escapes import Escapes
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.graph import kept_at
from trainguard.sanitize.core.holders import graphs_released
from trainguard.sanitize.core.unreached import UnreachedOutputs
from trainguard.sanitize.core.records import ForwardCall, first_tensor


class GradReenabled(UnreachedOutputs):
    code = "TG104"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.trained: set = set()  # re-enabling lines under which a backward ran
        self.escapes = Escapes(self.state)  # values made in a block that leave it (core/escapes)
        self.outputs: set[int] = set()  # id(grad_fn) of the outputs followed (not held)

    def on_grad_block_exit(self, where: Any, frame: Any, before: set) -> None:
        """Values the closing block computed from a model's output that leave it with a graph
        (``probs = torch.softmax(logits, 1)`` beside a saliency map's gradient)."""
        if where in self.trained:
            return  # a backward ran in the region: test-time training
        self.escapes.block_exit(frame, before, self.outputs,
                                lambda name, t: ("escaped", where, name,
                                                 type(t.grad_fn).__name__, kept_at(t)))
        self.outputs.clear()

    def on_step(self, optimizer: Any) -> None:
        self._escaped()
        super().on_step(optimizer)

    def on_exit(self) -> None:
        self._escaped(final=True)
        super().on_exit()

    def _escaped(self, final: bool = False) -> None:
        if self.escapes:
            for key in self.escapes.resolve(final=final):
                self.report_unreached(key)

    def on_backward_done(self, call: Any) -> None:
        if self.state.no_grad_depth:
            where = self.state.reenabled_at()
            if where is not None:
                self.trained.add(where)  # a probe trained in the re-enabled region
        super().on_backward_done(call)

    def on_root_forward(self, call: ForwardCall) -> None:
        self._resolve()
        self._escaped()
        if self.state.in_backward:
            return
        if call.reenabled:
            where = self.state.reenabled_at() or call.where
        elif not call.grad_enabled and self.state.no_grad_depth and self.state.grad_on_at:
            # called with grad off, yet its forward turned grad back on (``with
            # torch.enable_grad():`` inside ``forward``, for a Grad-CAM): outputs with a grad_fn
            # come from that region
            where = self.state.grad_on_at
        else:
            return
        for tensor in first_tensor(call.output):
            # (a graph the forward itself already ran autograd.grad through, freeing it: used)
            if tensor.grad_fn is not None and not graphs_released(tensor):
                kept = kept_at(tensor)  # (a gradient that kept its graph: the line to change)
                self.follow(tensor, ("kept", where, f"{type(call.module).__name__}'s output",
                                     type(tensor.grad_fn).__name__, kept) if kept else
                            (where, type(call.module).__name__, call.where))
                if len(self.outputs) > 256:
                    self.outputs.clear()
                self.outputs.add(id(tensor.grad_fn))  # judged here, not as a value leaving

    def on_loss(self, call: Any) -> None:
        """A loss computed with grad turned back on inside a ``no_grad`` region (a validation
        step's bare ``torch.set_grad_enabled(True)`` still on after the forward that needed it,
        Lightning-AI/pytorch-lightning#10287): followed like a forward's output."""
        import torch

        if self.state.in_backward or not self.state.no_grad_depth or \
                not torch.is_grad_enabled():
            return
        where = self.state.reenabled_at()
        output = call.output
        # (a graph that autograd.grad already ran through in the forward counts here: the
        # loss's own nodes are new, and no backward can use them)
        if where is None or not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        self.follow(output, (where, call.name, call.where))

    def _needed(self, where: Any) -> bool:
        # grad was needed there: the region trains, or takes gradients with
        # torch.autograd.grad (an attack's input gradient; its other forwards aside)
        return where in self.trained or where in self.state.grads_taken_at

    def _report_kept(self, where: Any, name: str, node: str, kept: Any) -> None:
        """A value that left the re-enabled region with a graph that a gradient taken there with
        ``create_graph=True`` (or ``retain_graph=True``) kept: reported at that gradient, whose
        graph evaluation does not need (forces under ``no_grad``: fairchem#199)."""
        self.report(
            f"this torch.autograd.grad() keeps its graph (create_graph=True or retain_graph=True) "
            f"inside the torch.enable_grad() block opened at {short_location(where)} in a "
            f"torch.no_grad() region: {name} left that block carrying a grad_fn ({node}) that no "
            "backward or torch.autograd.grad ever used, so evaluation keeps graphs for nothing",
            fix="keep the graph only when training through the gradient "
                "(create_graph=self.training), and .detach() what evaluation keeps",
            where=kept)

    def report_unreached(self, key: tuple) -> None:
        import os

        if key[0] in ("escaped", "kept"):
            kind, where, name, node, kept = key
            if kept is not None:
                if kind == "escaped" or not self._needed(where):
                    self._report_kept(where, f"`{name}`" if kind == "escaped" else name,
                                      node, kept)
                return
            # the block takes a gradient itself (a gradient embedding, a saliency map): it
            # needs grad, and the line to change is the one that made the escaping value
            made = _made_in_block(where, name) if self._needed(where) else None
            opened = "opened here" if made is None else \
                f"opened at {short_location(where)}, which needs grad for its own gradient,"
            self.report(
                f"`{name}` was computed {'here ' if made else ''}inside the torch.enable_grad() "
                f"block {opened} in a torch.no_grad() region and left it carrying a grad_fn "
                f"({node}) that no backward or torch.autograd.grad ever used: evaluation keeps "
                "graphs for nothing",
                fix=f"compute `{name}` after the block (under no_grad) or .detach() it; keep "
                    "only the gradient computation inside torch.enable_grad()",
                where=made or where)
            return
        where, name, forward_at = key
        if self._needed(where):
            return
        at = f"{os.path.basename(forward_at[0])}:{forward_at[1]}" if forward_at else "?"
        self.report(
            f"grad mode was turned back on here inside a torch.no_grad() region: {name}'s "
            f"{'call' if name[:1].islower() or name.endswith('Loss') else 'forward'} at {at} "
            "built a graph (its output carries a grad_fn) that no backward ever used",
            fix="remove torch.enable_grad()/set_grad_enabled(True) from the evaluation code, "
                "or keep it only around the part that needs gradients",
            where=where)


def _made_in_block(where: Any, name: str) -> Any:
    """Where the ``with`` statement at ``where`` (``with torch.enable_grad():``) last assigns
    ``name`` in its body (``probs = logits.softmax(1)``); None when not found (a decorator)."""
    import ast

    from trainguard.sanitize.core.bounds import parse_file

    tree = parse_file(where[0]) if where else None
    block = next((n for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))
                  and n.lineno == where[1]), None) if tree is not None else None
    stores = [n for stmt in getattr(block, "body", ()) for n in ast.walk(stmt)
              if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    last = max(stores, key=lambda n: (n.lineno, n.col_offset), default=None)
    return (where[0], last.lineno, last.col_offset + 1) if last is not None else None
