"""TG205 gradient-cut: parameters the optimizer holds never receive a gradient.

What it watches: at each of an optimizer's first steps, which of its parameters that require grad
still have ``p.grad is None`` (a cheap pass over the parameters, stopped after the first
``_STEPS`` steps of each optimizer).

When it fires: some parameters had no gradient at every one of those steps although backward ran:
the path from the loss to them is cut (``.detach()``, ``.data``, ``.item()``, a numpy round trip,
an integer cast) or their module is never used in the forward. The finding names the parameters
(by their names in the models seen) and is reported at the ``optimizer.step()`` line.

Silent on: parameters of a module that was replaced after the optimizer was built (no model
seen holds them: TG304 reports that); frozen parameters (``requires_grad=False``); parameters that got a gradient at any of
the first steps (branches used only sometimes); several optimizers (each is judged on its own
steps); optimizers that never step.

Reference: GitHub yifita/deep_cage#16 (a ``.detach()`` left a loss term without effect) and
isayev/ReLeaSE#39 (a loss rebuilt through ``.item()``/numpy left every grad None); autograd notes
(https://pytorch.org/docs/stable/notes/autograd.html).
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.checks import Check

_STEPS = 3  # steps over which a parameter must never get a gradient


class GradientCut(Check):
    code = "TG205"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        # id(optimizer) -> [steps seen, ids of params that never had a grad so far]
        self.seen: dict[int, list] = {}

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
            names = self._names(never)
            self.report(
                f"{len(never)} of the {len(params)} trainable parameters given to "
                f"{type(optimizer).__name__} never received a gradient in {_STEPS} steps "
                f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}): the path from "
                "the loss to them is cut (.detach(), .data, .item(), numpy, an integer cast) or "
                "their module is not used in forward",
                fix="find where the output of those modules stops carrying grad_fn and compute "
                    "it with torch operations; freeze (requires_grad_(False)) what is unused on "
                    "purpose")

    def _in_models(self, ids: set[int]) -> set[int]:
        """Leave out parameters no watched model holds any more: a module replaced after the
        optimizer was built is TG304's finding (params-not-in-optimizer), not a cut path."""
        models = list(self.state.models)
        if not models:
            return ids
        held = {id(p) for model in models for p in model.parameters()}
        return ids & held

    def _names(self, ids: set[int]) -> list[str]:
        names: list[str] = []
        for model in list(self.state.models):
            for name, p in model.named_parameters():
                if id(p) in ids and name not in names:
                    names.append(f"{name} {tuple(p.shape)}")
        return names or [f"{len(ids)} unnamed parameter(s)"]
