"""TG304 params-not-in-optimizer: parameters that receive gradients but no optimizer updates.

What it watches: once, just before the second optimizer step of the run (by then every optimizer of
a GAN or of a split backbone/head has stepped at least once), the parameters of each model seen
(the outermost modules called): those that require grad and hold a gradient are compared with the
parameters of every optimizer that has stepped. Suspects are confirmed once more a few steps later
(or at the end of the run), against the optimizers known then.

When it fires: a model trained by an optimizer (some of its parameters are in one) has parameters
that receive gradients but that no optimizer holds: a head added after the optimizer was built, a
layer replaced (``model.fc = nn.Linear(...)``) after ``optimizer = Adam(model.parameters())``, a
submodule kept in a plain list instead of ``nn.ModuleList``. Backward fills their ``.grad`` and they
never change.

Silent on: frozen parameters (``requires_grad=False``), parameters that never get a gradient
(unused branches, EMA teachers), models no optimizer trains at all (evaluation, feature
extraction), GANs and other multi-optimizer setups where each part has its optimizer. Frozen
parameters that an optimizer holds are harmless (no gradient, no update) and are not reported.

Reference: ``torch.optim`` "Constructing it" (the optimizer holds the tensors it was given)
https://pytorch.org/docs/stable/optim.html#constructing-it; guide
https://runebook.dev/en/docs/pytorch/generated/torch.optim.adafactor/torch.optim.Adafactor.add_param_group.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.checks import Check

_CONFIRM_AT_STEP = 6


class ParamsNotInOptimizer(Check):
    code = "TG304"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.phase = 0  # 0: not yet looked, 1: suspects noted, 2: done
        self.suspects: list[tuple[Any, Any, str]] = []  # (weakref model, weakref param, name)

    def on_step_pre(self, optimizer: Any) -> None:
        if self.phase == 2 or self.state.step < 1:
            return
        if self.phase == 0:
            self.phase = 1
            self.suspects = self._missing()
            if not self.suspects:
                self.phase = 2
        elif self.state.step >= _CONFIRM_AT_STEP:
            self._confirm()

    def on_exit(self) -> None:
        if self.phase == 1:
            self._confirm(where_known=False)

    def _held(self) -> set[int]:
        return {id(p) for o in list(self.state.optimizers) for g in o.param_groups
                for p in g["params"]}

    def _missing(self) -> list[tuple[Any, Any, str]]:
        held = self._held()
        out = []
        for model in list(self.state.models):
            named = list(model.named_parameters())
            if not any(id(p) in held for _, p in named):
                continue  # no optimizer trains this model
            for name, p in named:
                if p.requires_grad and p.grad is not None and id(p) not in held:
                    out.append((weakref.ref(model), weakref.ref(p), name))
        return out

    def _confirm(self, *, where_known: bool = True) -> None:
        self.phase = 2
        held = self._held()
        still = [(m(), p(), n) for m, p, n in self.suspects
                 if m() is not None and p() is not None and id(p()) not in held]
        self.suspects = []
        if not still:
            return
        model = still[0][0]
        total = sum(p.numel() for _, p, _ in still)
        names = ", ".join(f"`{n}` {tuple(p.shape)}" for _, p, n in still[:4])
        more = f" and {len(still) - 4} more" if len(still) > 4 else ""
        self.report(
            f"{len(still)} parameters of {type(model).__name__} ({total} values: {names}{more}) "
            "receive gradients but no optimizer holds them, so they never change (the optimizer "
            "was built before they were added or replaced)",
            fix="build the optimizer after the model is complete (after replacing layers or moving "
                "it), or add them with optimizer.add_param_group({'params': [...]})",
            where=None if where_known else self._where())

    def _where(self) -> Any:
        last = self.state.backwards[-1] if self.state.backwards else None
        return last.where if last is not None else None
