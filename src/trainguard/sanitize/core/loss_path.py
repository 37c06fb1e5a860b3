"""Which models and parameters lie on a loss's path, for TG304 (params-not-in-optimizer).

``Suspect`` is a parameter found missing from every optimizer, watched through a
post-accumulate-grad hook until it is confirmed or cleared; ``Flow`` records, on checked steps,
which models' outputs went into which models and losses; ``own_leaf_in`` and
``takes_a_target_like`` tell a loss module with its own learnable parameters (an ArcFace margin
head) from a loss network applied to both a prediction and its target (a perceptual loss),
whose parameters are not meant to learn. Bounds are given per function.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.graph import MADE, graph_nodes, node_metadata
from trainguard.sanitize.core.params import value_sum
from trainguard.sanitize.core.records import graph_tensors


class Suspect:
    """A parameter found missing from every optimizer: what it was then, and whether backward has
    accumulated a gradient into it since (a hook, so this is known even after it is freed)."""

    __slots__ = ("ref", "name", "shape", "numel", "model", "stale", "listed", "series", "trained",
                 "handle", "version", "total", "built")

    def __init__(self, p: Any, name: str, model: str, stale: str, listed: str,
                 series: str = "", built: Any = None) -> None:
        self.ref = weakref.ref(p)
        self.name = name
        self.shape = tuple(p.shape)
        self.numel = p.numel()
        self.model = model  # the model's class name
        self.stale = stale  # the class of the optimizer stepping without gradients, or ""
        self.listed = listed  # the plain list/dict attribute that keeps its module, or ""
        self.series = series  # how its separate model is chained to a trained one, or ""
        self.built = built  # the user's line that built the optimizer it was left out of, or None
        self.trained = False  # set by the hook
        self.handle: Any = None
        self.version = p._version
        self.total = value_sum(p)

    def watch(self) -> None:
        def accumulated(_: Any) -> None:
            self.trained = True

        try:
            self.handle = self.ref().register_post_accumulate_grad_hook(accumulated)
        except (RuntimeError, AttributeError):  # not a leaf: fall back to "always trained"
            self.trained = True

    def release(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    def changed(self, p: Any) -> bool:
        """Whether ``p``'s value changed since it was noted (something else updates it)."""
        return p._version != self.version or value_sum(p) != self.total


class Flow:
    """Which models' outputs went where on checked steps (each model by ``id()``)."""

    __slots__ = ("consumed", "loss_inputs", "loss_targets", "weighs")

    def __init__(self) -> None:
        self.consumed: dict[int, set[int]] = {}  # model -> models whose outputs its call took
        self.weighs: dict[int, set[int]] = {}  # model -> models whose losses its call took
        self.loss_inputs: set[int] = set()  # models whose outputs a loss took as its input
        self.loss_targets: set[int] = set()  # ... as its target

    def after(self, key: int) -> set[int]:
        """The models that take ``key``'s output, directly or through other models."""
        out: set[int] = set()
        todo = [key]
        while todo:
            k = todo.pop()
            for later, earlier in self.consumed.items():
                if k in earlier and later not in out:
                    out.add(later)
                    todo.append(later)
        out.discard(key)
        return out

    def series(self, model: Any, trained: dict[int, Any]) -> str:
        """How ``model`` (which no optimizer holds) sits in series with a trained model on the way
        to the loss, as a phrase for the finding, or "" when it does not (a teacher or a feature
        network beside the model, a loss network applied to a prediction that is itself a loss's
        input, a module in eval mode)."""
        if not model.training:
            return ""
        flow, key = self, id(model)
        down = flow.after(key)
        feeds = down & trained.keys()
        if feeds:  # a trained model takes its output: an embedding or an encoder before it
            name = type(trained[next(iter(feeds))]).__name__
            return f"its output goes into {name}, which an optimizer trains"
        takes = [k for k in trained if key in flow.after(k)]
        weighs = flow.weighs.get(key, set()) & trained.keys()
        if weighs:  # its parameters weigh the losses of a trained model (uncertainty weighting)
            return (f"it takes the losses of {type(trained[next(iter(weighs))]).__name__}, which "
                    "an optimizer trains, and its output is backpropagated")
        if not takes or any(k in flow.loss_inputs for k in takes):
            return ""  # beside the trained models, or applied to a prediction a loss takes itself
        # a head, a neck or a decoder: the trained model's output reaches the loss only through
        # it -- unless a loss compares its outputs with each other (a loss network applied to the
        # prediction and to the target)
        down.add(key)
        if not down & flow.loss_inputs or down & flow.loss_targets:
            return ""
        return (f"it takes the output of {type(trained[takes[0]]).__name__}, which an optimizer "
                "trains, on the way to the loss")


def own_leaf_in(output: Any, module: Any, limit: int = 64) -> bool:
    """Whether the graph of the first tensor in ``output`` (an outermost call's, which computed a
    loss inside) reaches one of ``module``'s own parameters as a leaf before any other model's
    output: the loss is computed with them (a learned class-weight vector passed as ``weight=``,
    an ArcFace margin head's weight). The walk stops at other models' outputs and after
    ``limit`` nodes."""
    own = {id(p) for p in module.parameters(recurse=True)}
    if not own:
        return False
    key = id(module)
    for tensor in graph_tensors((output,), {}):
        found = [False]

        def stop(node: Any) -> bool:
            meta = node_metadata(node)
            made = meta.get(MADE) if meta else None
            if made is not None and made.model_id != key:
                return True  # another model's output: its parameters are its own
            if id(getattr(node, "variable", None)) in own:
                found[0] = True
                return True
            return False

        for _ in graph_nodes(tensor.grad_fn, limit=limit, stop=stop):
            if found[0]:
                return True
        return found[0]
    return False


def takes_a_target_like(call: Any) -> bool:
    """Whether the call took, beside a tensor with a graph, a floating tensor without one of the
    same shape: a target it compares the prediction with (a perceptual loss network applied to
    both, whose parameters are not meant to learn), not class labels."""
    shapes = {tuple(t.shape) for t in graph_tensors(call.args, call.kwargs)}
    for a in (*call.args, *call.kwargs.values()):
        if (getattr(a, "grad_fn", 1) is None and getattr(a, "is_floating_point", None) is not None
                and a.is_floating_point() and tuple(a.shape) in shapes):
            return True
    return False
