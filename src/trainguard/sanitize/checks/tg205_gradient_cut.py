"""TG205 gradient-cut: parameters the optimizer holds never receive a gradient.

What it watches: at each of an optimizer's first ``_STEPS`` steps, which of its parameters that
require grad still have ``p.grad is None``, or on the CPU a gradient of zeros only (a cheap pass
over the parameters; ``core/grad_suspects.py``). Those without one at the first two get a
post-accumulate-grad hook that notes a gradient received later, and the probe below looks at the
third (so a run of 3 steps is placed too); reported only if the optimizer took all 3. Parameters
with zero gradients are reported only with the cut found (below): a coefficient of 0 proves nothing.

When it fires: at the end of the run, some parameters never received a gradient although backward
ran (some or all of an optimizer's: a learnable scalar turned into a new tensor through
``.item()``, an actor whose output goes through numpy while the critic trains): the path from the loss to them is cut (``.detach()``, ``.data``, ``.item()``, a numpy round
trip, an integer cast) or their module is never used in the forward. The finding names the
parameters (by their names in the models seen) and is reported at the cause when the probe below
finds it (the line of the first output named), else at the ``optimizer.step()`` line. Where the
cut is: once the suspects are found, the largest modules whose trainable parameters are
all suspects (a submodule such as ``encoder``, or a whole model) get a forward hook, which notes
their output's ``grad_fn`` and the user line that called them; at the next backward that trains
the optimizer's other parameters (a GAN's other loss is skipped, up to 8 backward calls; when none
of them gets a gradient, the next backward that trains any leaf) the
loss's graph is searched for those nodes (once). An output the loss does not reach is named with
its line ("the cut is after it": ``self.encoder(x).detach()``), an output made with grad disabled
is named as such, and a submodule not called in that step is said to be unused.

Silent on: a parameter of a PyTorch layer whose other parameters get gradients (the last
``Linear``'s bias of an energy model fitted on its forces, ``-autograd.grad(energy, x)``: a
constant offset has no derivative; coarse-graining/cgnet#105); parameters of a module that was
replaced after the optimizer was built (no model seen holds them while one of the models'
trainable parameters is in no optimizer: TG304 reports that; a tensor given to an optimizer by
name, which no model holds, is judged); frozen parameters (``requires_grad=False``); parameters that
got a gradient at any step (branches used only sometimes, a head trained after a warm-up, tasks
sampled per batch); several optimizers (each judged on its own steps); optimizers that never step;
a model output the training code never reads (weighted 0, left out, not cut: ``core/handed.py``).

Cost: at each of an optimizer's first 3 steps, one pass over its parameters; once suspects are
found, one pass over the models' modules (4 holders at most) and, at each of the next 8 backward
calls at most, one walk of the loss's graph, 20,000 nodes in all (a walk cut short names no cut);
at exit, one pass over the suspects.

Reference: yifita/deep_cage#16 (a ``.detach()`` left a loss term without effect), isayev/ReLeaSE#39
(a loss rebuilt through ``.item()``/numpy), https://pytorch.org/docs/stable/notes/autograd.html.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.cuts import (built_lines, cut_inside, routed, trace_after_forward,
                                           trace_next_forward)
from trainguard.sanitize.core.frames import short_location, user_frame, user_location
from trainguard.sanitize.core.grad_suspects import Suspects, without_gradient
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.handed import HandedOut, settle
from trainguard.sanitize.core.number_cuts import LEAF_BY_HAND, NumberWatch, number_clause
from trainguard.sanitize.core.params import held_ids, param_names
from trainguard.sanitize.core.records import first_tensor
from trainguard.sanitize.core.terms import TermWatch

_STEPS = 3  # steps over which a parameter must never get a gradient
_PROBE_WAIT = 8  # backward calls a probe waits for one that trains its optimizer's other parameters


class _Probe:
    """One step's look at the submodules holding a suspect optimizer's parameters: their outputs'
    ``grad_fn`` (held until the next backward, then dropped) and the lines that called them."""

    def __init__(self, suspects: Suspects, modules: dict[str, Any], others: set[int],
                 built: dict[str, Any], roots: Any) -> None:
        self.suspects = suspects
        self.built = built  # name -> the `self.<attr> = ...` line that made it, where found
        self.roots = list(roots)  # the models seen, for a trace up to the end of their call
        self.others = others  # ids of the optimizer's parameters that do get gradients
        self.waited = 0  # backward calls that reached none of them (another model's loss)
        self.calls: dict[str, tuple[Any, Any, bool] | None] = {}  # name -> (grad_fn, line, grad on)
        self.handles = [module.register_forward_hook(self._hook(name))
                        for name, module in modules.items()]
        self.modules = modules
        self.names = list(modules)
        self.handed: list[tuple[Any, HandedOut]] = []  # outputs the model returns (core/handed)

    def _hook(self, name: str) -> Any:
        import torch

        def seen(module: Any, inputs: Any, output: Any) -> None:
            if name in self.calls:
                return
            try:  # a hook on the user's module: it must never raise into the forward
                out = output if isinstance(output, torch.Tensor) else next(
                    iter(first_tensor(output, limit=1)), None)
                if out is not None:
                    self.calls[name] = (out.grad_fn, user_location(sys._getframe(1)),
                                        torch.is_grad_enabled())
            except Exception:
                self.calls[name] = None  # seen, but not readable: nothing is said about it
        return seen

    def judge(self, roots: tuple) -> str | None:
        """Where the path to the suspects' modules is cut, from the backward's ``roots``; None
        when this backward trains none of the optimizer's other parameters (a GAN's other loss):
        it says nothing about this optimizer's loss."""
        reached, variables = set(), set()
        budget = Budget(GRAPH_NODES)  # the roots' graphs together
        for root in roots:
            node = getattr(root, "grad_fn", None)
            if node is None and getattr(root, "requires_grad", False):
                # a loss made a leaf by hand (``loss.requires_grad = True`` on a cut loss, to
                # silence "does not require grad"): this backward trains only that leaf
                variables.add(id(root))
            if node is not None:
                for n in graph_nodes(node, budget=budget):
                    reached.add(id(n))
                    variable = getattr(n, "variable", None)  # AccumulateGrad: a leaf
                    if variable is not None:
                        variables.add(id(variable))
        if not (variables & self.others if self.others else variables):
            # the outputs noted stay for the backward of this optimizer's loss (with none of its
            # parameters trained: for a backward that trains some leaf, the loss they should join)
            return None
        self.release()
        parts = []
        for name in self.names:
            if name not in self.calls:
                if routed(self.roots, name):  # an expert the router never picked: excused
                    self.suspects.got.update(id(p) for p in self.modules[name].parameters())
                    continue
                made = self.built.get(name)
                parts.append(f"`{name}` was not called in the step looked at (unused in forward"
                             + (f"; built at {short_location(made)})" if made else ")"))
                if made is not None and self.suspects.cut_at is None:
                    self.suspects.cut_at = made
                continue
            call = self.calls[name]
            if call is None:
                continue
            node, where, grad = call
            at = short_location(where)
            if node is None:
                parts.append(f"`{name}`'s output at {at} carries no grad_fn"
                             + ("" if grad else " (computed with grad disabled)"))
                if grad:  # the forward itself ends the graph: find the op at its next call
                    self._trace(name)
            elif id(node) not in reached and not budget.spent:  # (a graph walked in part: unknown)
                parts.append(f"`{name}`'s output at {at} does not reach the loss: the cut is "
                             "after it, on that line or later")
                self._trace(name, after=True)
                module = self.modules[name]
                for root in [m for m in self.roots if module in m.modules()][:1]:
                    self.handed.append((module, HandedOut(root, module)))
            else:
                inside = cut_inside(self.modules.get(name), node)
                if inside is None:
                    continue
                parts.append(f"`{name}`'s output at {at} reaches the loss but not its own "
                             f"parameters: its forward ({short_location(inside)}) cuts them")
                where = inside
                self._trace(name)
            if self.suspects.cut_at is None:
                self.suspects.cut_at = where
        self.calls.clear()
        self.modules = {}
        return "; ".join(parts)

    def _trace(self, name: str, *, after: bool = False) -> None:
        """Follow ``name``'s next forward (:func:`~trainguard.sanitize.core.cuts.trace_next_forward`),
        or with ``after`` what its output goes through up to the end of the model's call
        (:func:`~trainguard.sanitize.core.cuts.trace_after_forward`), and move the finding to the
        op that cuts the path, once."""
        module = self.modules.get(name)
        if module is None or self.suspects.traced:
            return
        root = next((m for m in self.roots if m is not module
                     and any(sub is module for sub in m.modules())), None) if after else None
        if after and root is None:
            return
        self.suspects.traced = True
        suspects = self.suspects

        def found(cut: tuple[str, Any]) -> None:
            op, where = cut
            if where is None:
                return
            suspects.cut_at, suspects.exact = where, True
            suspects.cut += (f"; the path from `{name}`'s "
                             + ("output" if after else "parameters in its forward")
                             + f" ends at {short_location(where)} (`{op}`)")

        if after:
            trace_after_forward(module, root, found)
        else:
            trace_next_forward(module, found)

    def release(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


class GradientCut(Check):
    code = "TG205"
    # while a probe waits for the next backward, and over the first backward calls (terms)
    on_demand = ("on_backward", "on_backward_done")

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # id(optimizer) -> [steps seen, ids of params that never had a grad so far, ids of
        # those that had a zero grad]
        self.seen: dict[int, list] = {}
        self.suspects: list[Suspects] = []
        self.probes: list[_Probe] = []
        self.terms = TermWatch()  # loss terms cut from every parameter (core/terms.py)
        self.numbers = NumberWatch()  # a loss rebuilt from numbers (core/number_cuts.py)
        self.numbered: Suspects | None = None  # ... the suspects it traces for
        self.placed: set[Any] = set()
        self.handed: list[tuple[Suspects, Any, HandedOut]] = []  # judged at the next step
        self.records: dict[int, list] = {}  # id(suspects) -> its optimizer's record in `seen`

    def on_built(self, obj: Any, where: Any) -> None:
        # the first backward calls come after an optimizer is built: look at their losses' terms
        if self.terms.pending:
            self.arm()

    def on_backward(self, call: Any) -> None:
        if self.terms.pending:
            for op, where in self.terms.backward(call):
                self._report_term(op, where)
        waiting = []
        for probe in self.probes:
            cut = probe.judge(call.tensors)
            if cut is not None:
                probe.suspects.cut = cut
                self.handed += [(probe.suspects, *h) for h in probe.handed]
                self.hold() if self.handed else None  # the next step must come: it closes them
            elif probe.waited < _PROBE_WAIT:
                probe.waited += 1
                waiting.append(probe)
            else:
                probe.release()
        self.probes = waiting
        if self.numbers.pending:
            cut = self.numbers.backward(call.tensors)
            if cut is not None and cut[1] is not None and self.numbered is not None:
                self.numbered.number = cut
        if not waiting and not self.terms.pending and not self.numbers.pending:
            self.disarm()

    def on_backward_done(self, call: Any) -> None:
        if self.terms.pending:
            self.terms.backward_done(call)
            if self.terms.trace is not None:
                self.hold()  # the traced cycle is checked up to its backward

    def _report_term(self, op: str, where: Any) -> None:
        """A loss term computed from a cut output (:mod:`~trainguard.sanitize.core.terms`)."""
        if where in self.placed:
            return
        self.placed.add(where)
        self.report(
            f"a term of the loss is computed from a tensor cut from the graph (`{op}` at "
            f"{short_location(where)}): the total is backpropagated, but that term is a constant "
            "to autograd, so it moves no parameter (its part of the loss does nothing)",
            fix="compute the term from the tensor itself (no detach/.data/no_grad on that path; "
                "softmax probabilities, not argmax or other integer results); if it is meant "
                "only for logging, keep it out of the loss",
            where=where)

    def on_step_pre(self, optimizer: Any) -> None:
        self.terms.settle()
        self.numbers.settle()
        self.handed = settle(self.handed)  # outputs returned by the model, then left out
        self.hold() if self.handed else None
        record = self.seen.get(id(optimizer))
        if record is None:
            key = id(optimizer)
            record = self.seen[key] = [0, None, set()]
            weakref.finalize(optimizer, self.seen.pop, key, None)
        steps, never, zero = record
        if steps >= _STEPS or self.state.backward_count == 0:
            return
        params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        missing, zeros = without_gradient(params)
        missing |= zeros
        never = missing if never is None else never & missing
        record[0], record[1], record[2] = steps + 1, never, zero | zeros
        if record[0] == _STEPS - 1 and never:  # a step early: the probe sees the last one
            never = self._in_models(never) - self._beside_trained(never)
        if never and record[0] == _STEPS - 1:
            suspects = Suspects(type(optimizer).__name__, len(params),
                                param_names(self.state.models, never, user_frame(
                                    sys._getframe(1))),
                                user_location(sys._getframe(1)), zero & never)
            suspects.follow([p for p in params if id(p) in never])
            self.suspects.append(suspects)
            self.records[id(suspects)] = record
            if not self.numbers.started:  # follow the values taken from them to the next loss
                self.numbered = suspects
                self.numbers.start([p for p in params if id(p) in never])
                self.arm()
                self.hold()
            modules = self._holders(never)
            if modules:
                others = {id(p) for p in params if id(p) not in never}
                self.probes.append(_Probe(suspects, modules, others, built_lines(self.state.models, modules),
                                          self.state.models))
                self.arm()

    def release(self) -> None:
        self.terms.close()
        self.numbers.close()
        for suspects in self.suspects:
            suspects.release()
        self.suspects, self.records = [], {}
        for probe in self.probes:
            probe.release()
        self.probes = []

    def _holders(self, ids: set[int]) -> dict[str, Any]:
        """The largest modules (at most 4) of the models seen whose trainable parameters are all
        in ``ids``: a whole model (named by its class: a GAN's generator) or a submodule (by its
        qualified name)."""
        found: dict[str, Any] = {}
        for model in list(self.state.models):
            prefixes: list[str] = []
            for name, module in model.named_modules():
                if any(name.startswith(p) for p in prefixes):
                    continue
                own = [p for p in module.parameters() if p.requires_grad]
                if own and all(id(p) in ids for p in own):
                    found[name or type(module).__name__] = module
                    if not name:
                        break  # the whole model: none of its parts is named
                    prefixes.append(f"{name}.")
                    if len(found) == 4:
                        return found
        return found

    def on_exit(self) -> None:
        """Report the parameters that still never received a gradient, at the cut found, else
        at the step line."""
        self.terms.close()
        self.numbers.close()
        for probe in self.probes:
            probe.release()
        for _, _, handed in self.handed:
            handed.close(judge=False)
        self.probes, self.handed = [], []
        suspects, self.suspects = self.suspects, []
        for s in suspects:
            s.release()
            never = s.never() if self.records.pop(id(s), [0])[0] >= _STEPS else None
            if not never:
                continue
            names = [s.names[key] for key in never]
            steps = self.state.step
            what = "a non-zero gradient" if any(key in s.zero for key in never) else "a gradient"
            self.report(
                f"{len(never)} of the {s.total} trainable parameters given to {s.optimizer} "
                f"never received {what} in the whole run ({steps} optimizer "
                f"step{'s' if steps != 1 else ''}; {', '.join(names[:4])}"
                f"{', ...' if len(names) > 4 else ''}): the path from the loss to them is cut "
                "(.detach(), .data, .item(), numpy, an integer cast) or their module is not used "
                f"in forward (optimizer step at {short_location(s.where)})"
                + (f"; {s.cut}" if s.cut else "")
                + number_clause(s.number),
                fix="find where the output of those modules stops carrying grad_fn and compute "
                    "it with torch operations; freeze (requires_grad_(False)) what is unused on "
                    "purpose",
                where=s.number[1] if s.number and not (s.exact and s.number[0] == LEAF_BY_HAND)
                else s.cut_at or s.where)  # (a cut traced in a forward: before a leaf by hand)

    def _in_models(self, ids: set[int]) -> set[int]:
        """Leave out parameters no watched model holds any more: a module replaced after the
        optimizer was built is TG304's finding, not a cut (its sign: a trainable parameter of the
        models that no optimizer holds). When every one is held, a tensor no model holds was
        made to be learned on its own (``Adam([offsets])``, ashawkey/torch-ngp#60): suspect."""
        models = list(self.state.models)
        if not models:
            return ids
        params = [p for model in models for p in model.parameters()]
        optimized = held_ids(list(self.state.optimizers))
        if all(id(p) in optimized for p in params if p.requires_grad):
            return ids
        return ids & {id(p) for p in params}

    def _beside_trained(self, ids: set[int]) -> set[int]:
        """Those of ``ids`` owned by a PyTorch layer (``nn.Linear``) whose other parameters got
        a gradient: no cut in the user's code reaches inside the layer, so the loss does not
        depend on them by its form (the last layer's bias of an energy whose forces alone are
        fitted: a constant offset of the energy, gone in its derivative)."""
        out: set[int] = set()
        for model in list(self.state.models):
            for module in model.modules():
                own = [p for p in module.parameters(recurse=False) if p.requires_grad]
                if len(own) > 1 and type(module).__module__.startswith("torch.nn.") and \
                        0 < sum(id(p) in ids for p in own) < len(own):
                    out.update(id(p) for p in own if id(p) in ids)
        return out
