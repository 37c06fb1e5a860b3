"""Where each model was put in its mode, and the user's stack at the latest backward: what a mode
check needs to say where a missing ``model.eval()`` belongs (see :mod:`.callstack`).

:class:`ModeHistory` is fed the ``on_mode`` events (user ``train()``/``eval()`` calls: rare, once
per epoch or evaluation) and the checked backward calls. A ``train()`` that restores what an
``eval()`` made earlier in the same running function changed (``estimate_loss()`` calling
``model.eval()`` then ``model.train()``) is not where the model's training mode comes from and is
not kept. Stacks hold frame ids and code objects only, never frames.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.callstack import Location, Stack, cause_line, user_stack
from trainguard.sanitize.core.frames import frame_location, short_location

__all__ = ["ModeHistory", "Candidate", "reverted_at"]


class ModeHistory:
    """The latest ``train()`` stack per module and the latest backward's stack."""

    def __init__(self) -> None:
        # id(module) -> (weak reference, order, the user's stack at its latest kept train())
        self.trained_at: dict[int, tuple[Any, int, Stack]] = {}
        # id(module) -> (weak reference, frame id, code, line) of its latest user eval()
        self.evals: dict[int, tuple[Any, int, Any, int]] = {}
        self.backward_stack: Stack | None = None
        # (weak reference, backward count, frame id, code, line) of the latest user train()
        self.last_train: tuple[Any, int, int, Any, Location | None] | None = None
        self.backward_taken = 0  # the backward count when backward_stack was taken
        self.calls = 0

    def note_backward(self, count: int) -> None:
        """A checked backward, the ``count``-th of the run: its stack is taken for the first 8
        and then once per 32 (a training loop's stack does not change from step to step)."""
        if count <= 8 or count - self.backward_taken >= 32:
            self.backward_stack = user_stack()
            self.backward_taken = count

    def note_mode(self, module: Any, mode: bool, frame: Any, backwards: int = 0) -> None:
        """A user ``train(mode)``/``eval()`` call on ``module`` made from ``frame``, after
        ``backwards`` backward calls."""
        key = id(module)
        if not mode:
            self.evals[key] = (weakref.ref(module), id(frame), frame.f_code, frame.f_lineno)
            return
        self.last_train = (weakref.ref(module), backwards, id(frame), frame.f_code,
                           frame_location(frame))
        before = self.evals.pop(key, None)
        if (before is not None and before[0]() is module and before[1] == id(frame)
                and before[2] is frame.f_code and before[3] < frame.f_lineno):
            return  # the function that called eval() restores the mode: no mode of its own
        self.calls += 1
        self.trained_at[key] = (weakref.ref(module), self.calls, user_stack(frame))
        if len(self.trained_at) > 64:
            for k in [k for k, v in self.trained_at.items() if v[0]() is None]:
                del self.trained_at[k]

    def train_before(self, model: Any, stack: Stack | None, backwards: int, where: Any
                     ) -> tuple[Location, str, str] | None:
        """``(line, message tail, fix)`` when the latest user ``train()`` of ``model`` (or of a
        module holding it) was called by a function on the stack of the evaluation at ``where``,
        in the same run of it, with no backward since (``backwards`` before the evaluation's
        call): that ``train()`` is where ``eval()`` was meant (``validate()`` opening with
        ``self.model.train()``, one epoch function for every phase that always calls it)."""
        found = self.last_train
        if found is None or stack is None or model is None or found[1] != backwards:
            return None
        owner = found[0]()
        if owner is None or not (owner is model or any(m is model for m in owner.modules())):
            return None
        if found[4] is None or not any(e[0] == found[2] and e[1] is found[3] for e in stack):
            return None
        return (found[4], f"; the evaluation's model call is at {short_location(where)}, and "
                          "this train() call, made by the evaluation's own function with no "
                          "backward after it, is what put the model in training mode",
                "call model.eval() here instead of model.train() (and model.train() before "
                "training again)")

    def missing_eval_at(self, model: Any, stack: Stack | None) -> Location | None:
        """Where ``model.eval()`` belongs for the evaluation whose user stack is ``stack``: its
        line in the deepest frame it shares with the latest kept ``train()`` of ``model`` (or of
        a module holding it, or one inside it), or else with the latest backward; None when
        nothing is known."""
        if stack is None or model is None:
            return None
        ref, latest = self.backward_stack, -1
        for owner_ref, order, train_stack in self.trained_at.values():
            owner = owner_ref()
            if owner is None or order <= latest:
                continue
            if owner is model or any(m is model for m in owner.modules()) or any(
                    m is owner for m in model.modules()):
                ref, latest = train_stack, order
        if not ref:
            return None
        return cause_line(stack, ref, into_phase=True)


class Candidate:
    """One model call TG101 may report: its outputs (weakly), line, model and what is known."""

    __slots__ = ("outputs", "where", "model_name", "active", "grad_enabled", "fired", "trains",
                 "followed", "callers", "loader", "loss", "backwards", "quiet", "reverted",
                 "module", "stack", "cause", "meant")

    def __init__(self, outputs: list[Any], where: Any, model_name: str, active: list[Any],
                 grad_enabled: bool, backwards: int = 0) -> None:
        self.outputs = [weakref.ref(t) for t in outputs]
        self.where = where
        self.model_name = model_name
        self.active = active  # the mode-dependent submodules in train mode at the call
        self.grad_enabled = grad_enabled
        self.fired = False
        self.trains = False  # by the source: the call sits in a loop that calls backward/step
        self.followed = False  # its outputs' graphs are followed (they fed a loss)
        self.callers: tuple = ()  # a training function's call: the user lines that called it
        self.loader = 0  # ... and the DataLoader iterated last (a serial number; 0: none)
        self.loss = ""  # ... and the loss its output goes to
        self.backwards = backwards  # backward calls completed before it
        self.quiet: bool | None = None  # no backward ran before the next model call
        self.reverted: Any = None  # the user's ``train()`` line that undid an ``eval()``
        self.module: Any = None  # a weak reference to the model
        self.stack: Stack | None = None  # the user's stack at the call (when it may be reported)
        self.cause: Location | None = None  # where its missing eval() belongs, taken with stack
        self.meant: Any = None  # its own function's train() call, when that is the cause

    def keep_stack(self, history: ModeHistory) -> None:
        """Keep the user's stack at this call (it may be reported), and where its missing
        ``eval()`` belongs while the model is alive: a finding held to the end of the run (a
        dropout-only model's last draw) outlives the model."""
        self.stack = user_stack(methods=True)
        if self.reverted is None:
            self.cause = history.missing_eval_at(self.module and self.module(), self.stack)

    def keep_meant(self, history: ModeHistory) -> None:
        """Keep :meth:`ModeHistory.train_before` for this call while it is known: a finding
        decided later (or by another path than :meth:`keep_stack`) reports that ``train()``."""
        found = history.last_train
        if found is not None and found[1] == self.backwards and self.module is not None:
            self.meant = history.train_before(self.module(), user_stack(methods=True),
                                              self.backwards, self.where)


def reverted_at(found: Any, backwards: int, module: Any) -> Any:
    """The line of the user's ``train()`` that put ``module`` (or a module holding it) back in
    training mode from eval mode, with no backward since (the same evaluation), or None.
    ``found`` is ``(weak reference to the module, line, backward calls then, ...)`` of the last
    such ``train()``, or None; ``backwards`` the backward calls completed now."""
    if found is None or found[2] != backwards:
        return None
    owner = found[0]()
    return found[1] if owner is not None and (
        owner is module or any(m is module for m in owner.modules())) else None
