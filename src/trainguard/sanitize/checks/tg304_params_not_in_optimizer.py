"""TG304 params-not-in-optimizer: parameters that receive gradients but no optimizer updates.

What it watches: just before optimizer steps 1, 6, 12, 24, 48 and then every 32 steps (on a settled
loop, the first checked step from each), the parameters of each model seen (the outermost modules
called): those that require grad and hold a gradient are compared with the parameters of every
optimizer that has stepped. A suspect is reported when, 5 steps later (or at the end
of the run), no optimizer known then holds it and it has received a gradient since (a ``.grad``
left over from an earlier phase of training does not count). While a suspect waits, the loop is
not settled.

When it fires: a model trained by an optimizer (some of its parameters are in one) has parameters
that receive gradients but that no optimizer holds: a head added after the optimizer was built, a
layer replaced (``model.fc = nn.Linear(...)``) after ``optimizer = Adam(model.parameters())``, a
submodule kept in a plain list instead of ``nn.ModuleList``, a frozen backbone unfrozen
(``requires_grad=True``) later in the run without ``add_param_group``. Backward fills their
``.grad`` and they never change. Also: a model no optimizer holds receives gradients while the
optimizer that steps has no gradient on any of its parameters (None, or zeros): an optimizer built
once for the first model of a k-fold or hyper-parameter loop that builds a new model each time.

Silent on: frozen parameters (``requires_grad=False``), parameters that never get a gradient
(unused branches, EMA teachers), models no optimizer trains at all (evaluation, feature
extraction, a teacher left trainable) while the stepping optimizer's own parameters have
gradients, GANs and other multi-optimizer setups where each part has its optimizer. Frozen
parameters that an optimizer holds are harmless (no gradient, no update) and are not reported.

Reference: ``torch.optim`` "Constructing it" (the optimizer holds the tensors it was given)
https://pytorch.org/docs/stable/optim.html#constructing-it; guide
https://runebook.dev/en/docs/pytorch/generated/torch.optim.adafactor/torch.optim.Adafactor.add_param_group.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.checks import Check
from trainguard.sanitize.frames import user_location

_CONFIRM_AFTER = 5  # steps between noting a suspect and confirming it
_EVERY = 32  # the most steps between two looks


class _Suspect:
    """A parameter found missing from every optimizer, and its gradient at that moment."""

    __slots__ = ("ref", "name", "model", "stale", "grad", "version")

    def __init__(self, p: Any, name: str, model: str, stale: str) -> None:
        self.ref = weakref.ref(p)
        self.name = name
        self.model = model  # the model's class name
        self.stale = stale  # the class of an optimizer stepping without gradients, or ""
        self.grad = weakref.ref(p.grad)
        self.version = p.grad._version

    def trained_since(self, p: Any) -> bool:
        """Whether ``p`` got a gradient since it was noted (a new ``.grad``, or one accumulated
        into in place): a ``.grad`` merely left over from earlier training does not count."""
        grad = p.grad
        return grad is not None and (grad is not self.grad() or grad._version != self.version)


class ParamsNotInOptimizer(Check):
    code = "TG304"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.next_step = 1  # the step before which the next look is made
        self.suspects: dict[int, _Suspect] = {}  # id(param): noted at the last look
        # id(param) -> weakref: ids are reused once a parameter is freed (a new model per fold)
        self.reported: dict[int, Any] = {}
        self.where: Any = None  # the step line where the suspects were noted

    def on_step_pre(self, optimizer: Any) -> None:
        step = self.state.step
        if step < self.next_step:
            return
        found = self._missing(optimizer)
        noted = self.suspects
        confirmed: list[_Suspect] = []
        self.suspects = {}
        new = False
        for k, v in found.items():
            old = noted.get(k)
            p = v.ref()
            if old is None or old.ref() is not p:
                self.suspects[k] = v
                new = True
            elif old.trained_since(p):
                confirmed.append(v)
            else:  # a .grad left over, unchanged since: kept as noted, looked at again later
                self.suspects[k] = old
        if new:
            self.where = user_location(sys._getframe(1))
            self.hold()  # check the next steps in full, so the look 5 steps on is made
        # Steps 1, 6, 12, 24, 48, then every 32 (on a settled loop the first checked step from
        # each); a new suspect is looked at again 5 steps later.
        self.next_step = step + (_CONFIRM_AFTER if new
                                 else max(_CONFIRM_AFTER, min(step, _EVERY)))
        if confirmed:
            self._report(confirmed)

    def on_exit(self) -> None:
        """Suspects noted at the last look are reported when they are alive, got a gradient since,
        and no optimizer took them meanwhile."""
        if not self.suspects:
            return
        held = self._held()
        still = []
        for k, v in self.suspects.items():
            p = v.ref()
            if p is not None and k not in held and v.trained_since(p):
                still.append(v)
        self.suspects = {}
        if still:
            self._report(still, where=self.where or self._where())

    def _held(self) -> set[int]:
        return {id(p) for o in list(self.state.optimizers) for g in o.param_groups
                for p in g["params"]}

    def _missing(self, optimizer: Any) -> dict[int, _Suspect]:
        """Parameters that require grad and hold a gradient, of a model some optimizer trains
        (or of any model, when ``optimizer`` is stepping without a single gradient), that no
        optimizer seen stepping holds."""
        held = self._held()
        stale: bool | None = None  # worked out only when a model no optimizer trains has grads
        out = {}
        for model in list(self.state.models):
            named = list(model.named_parameters())
            cause = ""
            if not any(id(p) in held for _, p in named):
                # No optimizer trains this model: evaluation, a frozen teacher, feature extraction
                # -- or an optimizer left holding an earlier model's parameters.
                if not any(p.requires_grad and p.grad is not None for _, p in named):
                    continue
                if stale is None:
                    stale = _without_gradients(optimizer)
                if not stale:
                    continue
                cause = type(optimizer).__name__
            for name, p in named:
                if (p.requires_grad and p.grad is not None and id(p) not in held
                        and not self._reported(p)):
                    out[id(p)] = _Suspect(p, name, type(model).__name__, cause)
        return out

    def _reported(self, p: Any) -> bool:
        ref = self.reported.get(id(p))
        return ref is not None and ref() is p

    def _report(self, still: list[_Suspect], where: Any = None) -> None:
        for v in still:
            self.reported[id(v.ref())] = v.ref
        params = [v.ref() for v in still]
        total = sum(p.numel() for p in params)
        names = ", ".join(f"`{v.name}` {tuple(p.shape)}" for v, p in zip(still[:4], params))
        more = f" and {len(still) - 4} more" if len(still) > 4 else ""
        head = (f"{len(still)} parameters of {still[0].model} ({total} values: {names}{more}) "
                "receive gradients but no optimizer holds them, so they never change")
        if still[0].stale:
            self.report(
                f"{head}; the {still[0].stale} that steps holds parameters none of which has a "
                "gradient (it was built for an earlier model, e.g. once before a loop that builds "
                "a new model per fold or per run)",
                fix="build the optimizer (and scheduler) after the model, each time a new model "
                    "is built",
                where=where)
            return
        self.report(
            f"{head} (the optimizer was built before they were added, replaced or unfrozen)",
            fix="build the optimizer after the model is complete (after replacing layers or "
                "moving it); for parameters unfrozen later (requires_grad=True), add them with "
                "optimizer.add_param_group({'params': [...]}) or build a new optimizer",
            where=where)

    def _where(self) -> Any:
        last = self.state.backwards[-1] if self.state.backwards else None
        return last.where if last is not None else None


def _without_gradients(optimizer: Any) -> bool:
    """True when none of ``optimizer``'s parameters holds a non-zero gradient (None, or zeros
    left by ``zero_grad(set_to_none=False)``)."""
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    return all(not g.is_sparse and not bool(g.any()) for g in grads)
