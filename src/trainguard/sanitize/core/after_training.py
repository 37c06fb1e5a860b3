"""Model calls after which nothing trained: an evaluation that the source took for a training loop.

TG101 reads a call's loop and callers to tell a training iteration from an evaluation: a loop that
calls ``backward`` or a ``step`` trains. A ``step`` by name is not always an optimizer's: an
environment's ``env.step(action)`` drives the rollout loop of an agent being evaluated after
training (a policy's ``predict()`` run under ``no_grad`` without ``eval()``, DLR-RM/
stable-baselines3#535). What tells them apart at run time is the mechanism itself: a training
iteration is followed by training, so at least one backward or optimizer step runs after the first
call of that model line from that chain of callers. An evaluation once training is over is followed
by none, to the end of the run.

:class:`AfterTraining` keeps, for each (model line, callers) a source reading put in a training
iteration, the first call made once the model was trained (an optimizer that holds its parameters
stepped before it), with the backward and step counts then; at the end of the run the calls after
which neither count moved are evaluations. Calls before the model is trained (a rollout that fills
a buffer before learning starts, a model this run never trains) and lines whose first call was
followed by training (an RL rollout between updates, a target network's forward) stay silent; so
does a line whose calls repeat one input (Monte Carlo dropout).
Cost: one dict look-up per such call; the caller chain, and the user's stack once per line and
chain (64 at most).
"""

from __future__ import annotations

from typing import Any

__all__ = ["AfterTraining"]

_KEPT = 64  # (model line, callers) chains followed


class AfterTraining:
    """First calls of model lines in a training iteration by the source, until the run shows
    whether anything trained after them."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        # (model line, callers) -> (backward count, step count, candidate), or None once settled
        self.first: dict[tuple, Any] = {}

    def wants(self, key: tuple, module: Any, state: Any) -> bool:
        """Whether a call of ``key`` (of ``module``) is the first one to keep: made once an
        optimizer that holds the model's parameters stepped, and no earlier call of it was kept
        or settled."""
        if key in self.first or len(self.first) >= _KEPT:
            return False
        if not state.step or not _stepped(module, state):
            self.first[key] = None  # (not trained yet: a buffer filled before learning starts,
            return False  # or a model this run never trains)
        return True

    def keep(self, key: tuple, cand: Any, state: Any) -> None:
        self.first[key] = (state.backward_count, state.step, cand)

    def drop(self, where: Any) -> None:
        """A repeat of one input at the model line ``where`` (Monte Carlo dropout): settled."""
        for key in self.first:
            if key[0] == where:
                self.first[key] = None

    def untrained(self, state: Any) -> list[Any]:
        """At the end of the run: the kept calls after which no backward or step ran."""
        found = [entry[2] for entry in self.first.values() if entry is not None and
                 entry[0] == state.backward_count and entry[1] == state.step]
        self.first.clear()
        return found


def _stepped(module: Any, state: Any) -> bool:
    """Whether an optimizer seen stepping holds a parameter of ``module``."""
    mine = {id(p) for p in module.parameters()}
    return bool(mine) and any(id(p) in mine for opt in list(state.optimizers)
                              for group in getattr(opt, "param_groups", ())
                              for p in group.get("params", ()))
