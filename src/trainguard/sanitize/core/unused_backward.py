"""Backward calls whose gradients no optimizer step ever uses (TG302: a step placed too early).

A backward is followed when it runs after an optimizer's ``step()`` and before any ``zero_grad``
of that optimizer's parameters, and reaches some of them: it adds onto the gradients that step
has already used, so only a later step of some optimizer it reached could still use what it adds
(``step()`` called before the last loss's backward, the adversarial term of a domain-adaptation
loop: MyeongJin-Kim/Learning-Texture-Invariant-Representation#11). What it reached is read from
its graph before it runs (the leaves of its ``AccumulateGrad`` nodes, a bounded walk), and
grouped by the optimizers holding them (built by user code or seen stepping): one *part* each.

A part is *used* when its optimizer steps after the backward, or when one of its parameters
changes in place in between (a hand-written update, SAM's ascent); it is *discarded* when a
``zero_grad`` clears all of its parameters first, their gradients finite and not all zero.
The backward is wasted when every part is discarded and none was used: a backward through a GAN's
discriminator into the generator is used by the generator's step, whatever the discriminator's
``zero_grad`` clears. It counts only when the ``zero_grad`` that discarded the last part is the
one that opens the next cycle: a step of a discarded part's optimizer follows it, after some
backward, with no other ``zero_grad`` of those parameters in between (a probe that cleans up
after itself is followed by the loop's own ``zero_grad``, or by an attack's backward and the
``zero_grad`` before the training backward).

Not followed: backward calls made inside ``step()`` (LBFGS closures) or keeping their graph
(per-task gradients), ones that also fill the gradient of a leaf no optimizer holds and that is
not an ``nn.Parameter`` (saliency maps, adversarial inputs: that gradient is what they are for),
ones through a model in eval mode (analysis, not training), and ones whose graph is larger than
the walk's bound.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.frames import user_location
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.params import zeroed_by
from trainguard.sanitize.core.values import readable

__all__ = ["Unused", "UnusedBackwards"]

_SAMPLE = 8  # parameters per part whose version and gradient are read
_OPEN = 8  # backward calls followed, and discarded ones waiting, at once (the oldest dropped)
_OPTIMIZERS = 16  # optimizers whose parameters are looked up


class _Part:
    """One optimizer's share of what a backward reached."""

    __slots__ = ("optimizer", "name", "ids", "params", "versions", "discarded")

    def __init__(self, optimizer: Any, reached: list[Any]) -> None:
        self.optimizer = weakref.ref(optimizer)
        self.name = type(optimizer).__name__
        self.ids = {id(p) for p in reached}
        sample = reached[:_SAMPLE // 2] + reached[-(_SAMPLE // 2):] if len(reached) > _SAMPLE \
            else reached
        self.params = [weakref.ref(p) for p in sample]
        self.versions = [p._version for p in sample]
        self.discarded = False


class Unused:
    """A followed backward: where it ran, the step it came after, and its parts."""

    __slots__ = ("where", "index", "step_name", "step_at", "parts", "zeroed_name", "zeroed_at",
                 "reached", "since")

    def __init__(self, where: Any, index: int, step: tuple[str, Any], parts: list[_Part],
                 reached: int) -> None:
        self.where = where  # the backward's line
        self.index = index  # backward calls completed before it
        self.step_name, self.step_at = step  # the optimizer whose step it came after, its line
        self.parts = parts
        self.reached = reached  # parameters held by an optimizer that it reached
        self.zeroed_name = ""  # the zero_grad that discarded the last part: its owner's class
        self.zeroed_at: Any = None  # ... and its line
        self.since = 0  # backward calls completed at that zero_grad


class UnusedBackwards:
    """Follows backward calls made after a step into that step's gradients (module docstring).

    ``stepped``, ``zeroed`` and ``backward`` are fed the events; ``stepped`` returns the wasted
    backward calls that step confirms.
    """

    def __init__(self, state: Any) -> None:
        self.state = state
        # id(optimizer) -> (weakref, the step's line): stepped, and no zero_grad since
        self.dirty: dict[int, tuple[Any, Any]] = {}
        self.built: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.open: list[Unused] = []  # followed: some part neither used nor discarded
        self.waiting: list[Unused] = []  # every part discarded, until the next step

    def clear(self, boundary: bool) -> None:
        """Forget what events not seen may have changed (the loop was settled): the backward
        calls followed, and, unless checking resumes at a cycle's start (settled cycles repeat
        the checked ones: the same optimizers stepped and not zeroed since), the steps."""
        if not boundary:
            self.dirty.clear()
        self.open.clear()
        self.waiting.clear()

    def stepped(self, optimizer: Any, where: Any) -> list[Unused]:
        """``optimizer.step()`` returned (at the user's line ``where``): returns the wasted
        backward calls it confirms (one of their parts is its, discarded, and a backward ran
        since that, with no other ``zero_grad`` of those parameters in between: the step of
        the next cycle)."""
        key = id(optimizer)
        self.open = [u for u in self.open
                     if not any(not p.discarded and id(p.optimizer()) == key for p in u.parts)]
        self.dirty[key] = (weakref.ref(optimizer), where)
        count = self.state.backward_count
        confirmed = [u for u in self.waiting if u.since < count
                     and any(id(p.optimizer()) == key for p in u.parts)]
        self.waiting = [u for u in self.waiting if u not in confirmed]
        return confirmed

    def zeroed(self, owner: Any, caller: Any) -> None:
        """A ``zero_grad`` of ``owner`` (an optimizer or a module), called from frame ``caller``."""
        if not (self.dirty or self.open or self.waiting):
            return
        only = next(iter(self.dirty.values()))[0]() if len(self.dirty) == 1 else None
        if only is owner and not (self.open or self.waiting):
            self.dirty.clear()  # the usual case: a loop zeroing the optimizer that stepped
            return
        ids = {id(p) for p in zeroed_by(owner)}
        for key, (ref, _) in list(self.dirty.items()):
            optimizer = ref()
            if optimizer is None or optimizer is owner or \
                    any(id(p) in ids for p in zeroed_by(optimizer)):
                del self.dirty[key]
        # a second zero_grad of the same parameters before the next step: the first was a
        # clean-up after a probe, not the zero_grad that opens the next cycle
        self.waiting = [u for u in self.waiting if not any(p.ids & ids for p in u.parts)]
        keep = []
        for unused in self.open:
            verdict = _discard(unused, ids)
            if verdict is None:
                keep.append(unused)
            elif verdict:
                unused.zeroed_name = type(owner).__name__
                unused.zeroed_at = user_location(caller)
                unused.since = self.state.backward_count
                self.waiting = (self.waiting + [unused])[-_OPEN:]
        self.open = keep

    def backward(self, call: Any) -> None:
        """A backward is about to run (``call.tensors`` its roots): followed when it adds onto
        gradients a step has used."""
        if self.dirty and not call.retain_graph and call.where is not None \
                and not self.state.in_step:
            unused = self._follow(call)
            if unused is not None:
                self.open = (self.open + [unused])[-_OPEN:]

    def _follow(self, call: Any) -> Unused | None:
        import torch

        leaves = _leaves(call.tensors)
        if not leaves:
            return None
        optimizers = [o for o in {id(o): o for o in [*self.state.optimizers, *self.built]}
                      .values()][:_OPTIMIZERS]
        held = {id(p): o for o in optimizers for p in zeroed_by(o)}
        if any(id(v) not in held and not isinstance(v, torch.nn.Parameter) for v in leaves):
            return None  # an input's gradient is what this backward is for
        reached: dict[int, list[Any]] = {}
        for v in leaves:
            if id(v) in held:
                reached.setdefault(id(held[id(v)]), []).append(v)
        dirty = [key for key in reached if key in self.dirty]
        if not dirty or _in_eval(self.state.models, reached):
            return None
        owners = {id(o): o for o in optimizers}
        parts = [_Part(owners[key], params) for key, params in reached.items()]
        ref, at = self.dirty[dirty[0]]
        step = (type(ref()).__name__, at)
        return Unused(call.where, call.index, step, parts, sum(len(v) for v in reached.values()))


def _discard(unused: Unused, ids: set[int]) -> bool | None:
    """What a ``zero_grad`` clearing ``ids`` does to ``unused``: None (it keeps waiting for a
    step or a ``zero_grad``), False (given up: used, or its gradients were not there to lose),
    True (its last part discarded)."""
    import torch

    for part in unused.parts:
        if part.discarded or not part.ids <= ids:
            continue
        params = [r() for r in part.params]
        if any(p is None for p in params):
            return False
        if any(p._version != v for p, v in zip(params, part.versions)):
            return False  # changed in place since: an update used the gradients
        grads = [p.grad for p in params]
        if any(g is None for g in grads) or not readable(*grads):
            return False  # cleared by other means (``p.grad = None``), or not readable
        # note: a sync on CUDA, paid only for a backward that came after a step
        if not all(bool(torch.isfinite(g).all()) for g in grads) or \
                not any(bool(g.any()) for g in grads):
            return False  # a GradScaler's skipped step, or nothing to lose
        part.discarded = True
    return True if all(p.discarded for p in unused.parts) else None


def _leaves(roots: Any) -> list[Any]:
    """The leaf tensors a backward from ``roots`` accumulates into (its ``AccumulateGrad``
    nodes'), each once; empty when the graph is larger than the walk's bound."""
    budget = Budget(GRAPH_NODES)
    found: dict[int, Any] = {}
    for root in roots:
        node = getattr(root, "grad_fn", None)
        if node is None:
            continue
        for current in graph_nodes(node, limit=GRAPH_NODES, budget=budget):
            variable = getattr(current, "variable", None)
            if variable is not None:
                found[id(variable)] = variable
    return [] if budget.spent else list(found.values())


def _in_eval(models: Any, reached: dict[int, list[Any]]) -> bool:
    """Whether a model in eval mode holds one of the ``reached`` parameters."""
    ids = {id(p) for params in reached.values() for p in params}
    return any(not m.training and any(id(p) in ids for p in m.parameters()) for m in models)
