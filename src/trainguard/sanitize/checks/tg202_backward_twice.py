"""TG202 backward-twice: a backward through a graph whose saved tensors an earlier backward freed.

What it watches: the outputs of outermost module calls, stamped by the watcher (in their autograd
node's metadata, ``state.MADE``) with the number of backward calls completed when they were made
and the line that made them. Nothing else runs per step.

When it fires: the script dies of PyTorch's "Trying to backward through the graph a second time".
The failing backward's graph is searched for stamped outputs made before the last successful
backward: those graphs were freed by it. The diagnosis names the module output and the line that
made it, the earlier backward (its line and step) that freed it, whether it was the same iteration
(two backward calls through one graph: sum the losses, or detach the output for the first one, as
a GAN's discriminator step must) or an earlier one (a tensor carried across iterations, such as an
RNN hidden state: detach it), and the variable still holding it. The same iteration is the same
optimizer step, or a freed output whose line made no newer output that the failing graph holds,
freed by a backward on another line (a GAN's generator output, used by the discriminator's backward
and, after ``opt_d.step()``, by the generator's); a carried tensor's line made a newer one this
iteration, or the same backward line freed it (an output computed once before the loop).

Silent on: any run that does not raise this error; ``retain_graph=True`` backwards.

Cost: only at a failed backward: one walk of its roots' graphs, 20,000 nodes in all, and one parse
of the line's file (``bounds.parse_file``).

Reference: ``torch.Tensor.backward`` docs (``retain_graph``); forum thread "RuntimeError: Trying
to backward through the graph a second time"
(https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795).
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.cuts import assigned_in_methods
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.holders import carried_names, graph_metadata, rebound_before
from trainguard.sanitize.core.records import MADE as _KEY
from trainguard.sanitize.core.records import BackwardCall
from trainguard.sanitize.core.source import SourceFile

_MESSAGE = "backward through the graph a second time"


class BackwardTwice(Check):
    code = "TG202"
    stamps = "outputs"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)

    def on_backward_failed(self, call: BackwardCall, exc: BaseException) -> None:
        if _MESSAGE not in str(exc):
            return
        stamps = []
        budget = Budget(GRAPH_NODES)  # the roots' graphs together
        for tensor in call.tensors:
            if tensor.grad_fn is not None:
                stamps += graph_metadata(tensor.grad_fn, _KEY, budget=budget)
        freed = [s for s in stamps if s.backward_count < call.index]
        # The earliest made is the shared trunk (an encoder, the first chunk's state).
        first = min(freed, key=lambda s: (s.backward_count, s.order)) if freed else None
        call.facts["tg202_freed"] = first
        call.facts["tg202_cached"] = None if first is not None else self._cached(call.tensors)
        # A carried tensor (an RNN's hidden state) is one whose line made a newer output that
        # this graph also holds; a GAN's generator output used by the discriminator's backward
        # and then the generator's is the latest output of its line.
        call.facts["tg202_renewed"] = first is not None and any(
            s.where == first.where and s.backward_count > first.backward_count for s in stamps)

    def _cached(self, roots: tuple) -> tuple[str, Any] | None:
        """``("RotaryEmbedding.cached_freqs", line)`` when the failing graph holds a tensor kept
        in a plain attribute of a module of the models seen (not a parameter or buffer: a cache
        filled in forward), with the line of the class that assigns it outside ``__init__``."""
        import torch

        nodes: set[int] = set()
        budget = Budget(GRAPH_NODES)
        for root in roots:
            if getattr(root, "grad_fn", None) is not None:
                nodes.update(id(n) for n in graph_nodes(root.grad_fn, budget=budget))
        for model in list(self.state.models):
            for module in model.modules():
                for attr, value in vars(module).items():
                    if isinstance(value, torch.Tensor) and value.grad_fn is not None \
                            and id(value.grad_fn) in nodes:
                        return (f"{type(module).__name__}.{attr}",
                                assigned_in_methods(type(module), attr))
        return None

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        if not isinstance(exc, RuntimeError) or _MESSAGE not in str(exc):
            return None
        failed = next((b for b in reversed(self.state.backwards) if b.failed), None)
        earlier = next((b for b in reversed(self.state.backwards) if not b.failed), None)
        if failed is None:
            return None
        made = failed.facts.get("tg202_freed")
        before = (f"the backward at {short_location(earlier.where)} "
                  f"(optimizer step {earlier.step + 1})"
                  if earlier is not None else "an earlier backward")
        cached = failed.facts.get("tg202_cached")
        if made is None and cached is not None:
            name, where = cached
            return Diagnosis(
                f"this backward runs through `{name}`, a tensor a module keeps between calls"
                + (f" (assigned at {short_location(where)})" if where else "")
                + f" with the graph of the step that made it, whose saved tensors {before} "
                "already freed: a cache filled in forward and reused by later steps",
                fix="cache a tensor computed without a graph (under torch.no_grad() or "
                    ".detach()) when its inputs are fixed, or recompute it in every forward when "
                    "they are learnable parameters",
                where=where or failed.where)
        if made is None:
            return Diagnosis(
                f"this backward runs through a graph whose saved tensors {before} already freed",
                fix="compute the graph again for the second backward, sum the losses and call "
                    "backward once, or pass retain_graph=True to the first backward",
                where=failed.where)
        made_step, made_where, module = made.step, made.where, made.module
        same_step = earlier is not None and made_step == earlier.step == failed.step
        what = f"the output of {module} made at {short_location(made_where)}"
        carried = carried_names(made_where)
        held = (f"; `{carried[0]}` is passed back into the call that made it"
                if carried else "")
        renewed = failed.facts.get("tg202_renewed", True)
        if same_step or (not renewed and earlier is not None and earlier.where != failed.where):
            # not remade since another backward line freed it: used twice in one iteration, even
            # when an optimizer step ran between the two backward calls (a GAN's D and G steps);
            # the same backward line again is the loop come round (an output cached before it)
            when = ("in the same step" if same_step else
                    "in the same iteration (an optimizer step ran between the two backward calls, "
                    f"and {short_location(made_where)} made no newer output)")
            return Diagnosis(
                f"this backward runs through {what}, whose saved tensors {before} already freed "
                f"{when}: two backward calls through one graph",
                fix="add the losses and call backward once (loss = loss_a + loss_b); when the "
                    f"first backward should not reach {module} (a GAN's discriminator step), give "
                    "it the output detached (D(fake.detach())); or pass retain_graph=True to the "
                    "first of the two backward calls",
                where=failed.where)
        rebound = rebound_before(made_where, carried[0]) if carried and made_where else None
        if rebound is not None:  # ``hidden = repackage_hidden(hidden)`` that copies, not cuts
            held += (f"; it is rebound at {short_location(rebound)} before that call, but what "
                     "that call returns still holds the old graph (a copy such as clone() keeps "
                     "the history; detach() cuts it)")
        once = not carried and made_step == 0 and _outside_loops(made_where)
        if once:  # data preprocessed once through a module, before the loop, graph and all
            held += ("; it was made once, outside any loop, and every step reuses it with the "
                     "graph of that one call")
        return Diagnosis(
            f"this backward (optimizer step {failed.step + 1}) runs through {what} during "
            f"optimizer step {made_step + 1}, whose saved tensors {before} already freed: a "
            f"tensor carried across iterations keeps the old graph{held}",
            fix="detach what is carried to the next iteration (e.g. hidden = hidden.detach()) "
                "or compute it again inside the loop; retain_graph=True would only grow memory"
                if not once else "make it without a graph (under torch.no_grad(), or "
                ".detach() it) when it is input data, or compute it again inside the loop when its "
                "module should learn",
            where=rebound or (made_where if carried or once else failed.where))


def _outside_loops(where: Any) -> bool:
    """Whether the call at ``where`` sits in no ``for``/``while`` of its function or module
    (``training_seq = to_channels(raw)`` at a script's top level, before the training loop;
    lucidrains/denoising-diffusion-pytorch#109)."""
    file = SourceFile.load(where[0]) if where is not None else None
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    return call is not None and file.loop(call, file.scope(call)) is None
