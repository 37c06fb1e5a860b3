"""TG205 gradient-cut: parameters the optimizer holds never receive a gradient.

What it watches: at each of an optimizer's first steps, which of its parameters that require grad
still have ``p.grad is None`` (a cheap pass over the parameters, stopped after the first
``_STEPS`` steps of each optimizer). Those that never had a gradient then get a
post-accumulate-grad hook that notes a gradient received later.

When it fires: at the end of the run, some parameters never received a gradient although backward
ran: the path from the loss to them is cut (``.detach()``, ``.data``, ``.item()``, a numpy round
trip, an integer cast) or their module is never used in the forward. The finding names the
parameters (by their names in the models seen) and is reported at the ``optimizer.step()`` line.

Silent on: parameters of a module that was replaced after the optimizer was built (no model
seen holds them: TG304 reports that); frozen parameters (``requires_grad=False``); parameters that
got a gradient at any step (branches used only sometimes, a head trained after a warm-up, tasks
sampled per batch); several optimizers (each is judged on its own steps); optimizers that never
step.

Reference: GitHub yifita/deep_cage#16 (a ``.detach()`` left a loss term without effect) and
isayev/ReLeaSE#39 (a loss rebuilt through ``.item()``/numpy left every grad None); autograd notes
(https://pytorch.org/docs/stable/notes/autograd.html).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.checks import Check
from trainguard.sanitize.frames import user_location

_STEPS = 3  # steps over which a parameter must never get a gradient


class _Suspects:
    """Parameters of one optimizer without a gradient in its first steps, followed to the end of
    the run by post-accumulate-grad hooks (``Tensor.register_post_accumulate_grad_hook``): any
    gradient later clears them (a head trained after a warm-up, a task sampled later)."""

    __slots__ = ("optimizer", "total", "names", "where", "got", "handles")

    def __init__(self, optimizer: str, total: int, names: dict[int, str], where: Any) -> None:
        self.optimizer = optimizer
        self.total = total
        self.names = names  # id(param) -> "name (shape)"
        self.where = where
        self.got: set[int] = set()
        self.handles: list[Any] = []

    def follow(self, params: list[Any]) -> None:
        for p in params:
            key = id(p)

            def accumulated(_: Any, key: int = key, got: set = self.got) -> None:
                got.add(key)

            self.handles.append(p.register_post_accumulate_grad_hook(accumulated))

    def release(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


class GradientCut(Check):
    code = "TG205"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        # id(optimizer) -> [steps seen, ids of params that never had a grad so far]
        self.seen: dict[int, list] = {}
        self.suspects: list[_Suspects] = []

    def on_step_pre(self, optimizer: Any) -> None:
        record = self.seen.get(id(optimizer))
        if record is None:
            key = id(optimizer)
            record = self.seen[key] = [0, None]
            weakref.finalize(optimizer, self.seen.pop, key, None)
        steps, never = record
        if steps >= _STEPS or self.state.backward_count == 0:
            return
        params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        missing = {id(p) for p in params if p.grad is None}
        never = missing if never is None else never & missing
        record[0], record[1] = steps + 1, never
        if record[0] == _STEPS and never:
            never = self._in_models(never)
        if record[0] == _STEPS and never and len(never) < len(params):
            suspects = _Suspects(type(optimizer).__name__, len(params), self._names(never),
                                 user_location(sys._getframe(1)))
            suspects.follow([p for p in params if id(p) in never])
            self.suspects.append(suspects)

    def release(self) -> None:
        for suspects in self.suspects:
            suspects.release()
        self.suspects = []

    def on_exit(self) -> None:
        """Report the parameters that still never received a gradient, at the step line."""
        suspects, self.suspects = self.suspects, []
        for s in suspects:
            s.release()
            never = [key for key in s.names if key not in s.got]
            if not never:
                continue
            names = [s.names[key] for key in never]
            steps = self.state.step
            self.report(
                f"{len(never)} of the {s.total} trainable parameters given to {s.optimizer} "
                f"never received a gradient in the whole run ({steps} optimizer "
                f"step{'s' if steps != 1 else ''}; {', '.join(names[:4])}"
                f"{', ...' if len(names) > 4 else ''}): the path from the loss to them is cut "
                "(.detach(), .data, .item(), numpy, an integer cast) or their module is not used "
                "in forward",
                fix="find where the output of those modules stops carrying grad_fn and compute "
                    "it with torch operations; freeze (requires_grad_(False)) what is unused on "
                    "purpose",
                where=s.where)

    def _in_models(self, ids: set[int]) -> set[int]:
        """Leave out parameters no watched model holds any more: a module replaced after the
        optimizer was built is TG304's finding (params-not-in-optimizer), not a cut path."""
        models = list(self.state.models)
        if not models:
            return ids
        held = {id(p) for model in models for p in model.parameters()}
        return ids & held

    def _names(self, ids: set[int]) -> dict[int, str]:
        """``id(param) -> "name (shape)"`` for ``ids``, by their names in the models seen."""
        names: dict[int, str] = {}
        for model in list(self.state.models):
            for name, p in model.named_parameters():
                if id(p) in ids and id(p) not in names:
                    names[id(p)] = f"{name} {tuple(p.shape)}"
        for key in ids - names.keys():
            names[key] = "an unnamed parameter"
        return names
