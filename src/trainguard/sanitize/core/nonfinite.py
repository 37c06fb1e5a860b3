"""Finding what made a value non-finite, on the rare path after a NaN/Inf was seen (TG405).

Two tools, both run once, never on a healthy step:

- :func:`rerun` runs a module's forward again on the same batch under ``torch.no_grad()`` (RNG
  forked, buffers copied: nothing the user computes changes), with forward hooks naming the first
  module whose output is non-finite and a ``TorchFunctionMode`` naming the first torch op (and
  the user's line) that made a non-finite value from finite inputs (``log(0)``, ``x / 0``, ``exp``
  overflow), or, with ``singular=True``, the first one evaluated where its derivative is infinite
  though its value is finite: ``sqrt`` at 0, ``acos``/``asin`` at +-1, ``x ** e`` (0 < e < 1) at
  0 (a norm of a zero vector has a zero subgradient). These give a NaN or Inf gradient while the
  loss stays finite (https://pytorch.org/docs/stable/notes/autograd.html#gradients-for-non-differentiable-functions).
- :func:`singular_node` walks a loss's graph (bounded) for a node whose saved input is at such a
  point (``LogBackward0`` of 0, ``SqrtBackward0`` of 0, ``DivBackward0`` by 0, ...).
"""

from __future__ import annotations

import contextlib
import gc
import math
import sys
from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, live_objects
from trainguard.sanitize.core.frames import user_location
from trainguard.sanitize.core.graph import graph_nodes, node_metadata
from trainguard.sanitize.core.records import MADE, Made

__all__ = ["Rerun", "grads_may_be_finite", "non_finite_grads", "scaled_root_is_non_finite", "finite_output", "is_stamped", "rerun", "scaler_in_use", "singular_node",
           "stamped_calls"]

_HUGE_LOSS = 1e30  # a scaled loss that overflowed counts as an infinite loss when the loss must exceed this
_JOINED = 1 << 20  # gradients of at most this many values in all are tested as one vector
_FRACTIONAL = 1.0  # ``x ** e`` with ``e`` below this has an infinite derivative at 0


class Rerun:
    """What a re-run found.

    Attributes:
        module: ``(qualified name, class name, own parameters non-finite)`` of the first module
            (execution order) whose output is non-finite, or None.
        op: ``(op name, (path, line, col) of the user's call or None, what was wrong)`` of the
            first operation that made a non-finite value from finite inputs (or, with
            ``singular``, was evaluated at a singular point of its derivative), or None.
        output: the re-run's output (None when it raised).
        made: ``{id(output tensor): (qualified name, class name, user's line of the call)}`` for
            the submodules' outputs (only when asked with ``record=True``).
    """

    __slots__ = ("module", "op", "output", "made")

    def made_by(self, tensor: Any) -> tuple[str, str, Any] | None:
        """``(qualified name, class name, user's line)`` of the innermost submodule whose re-run
        output holds the same values as ``tensor`` (also reshaped: ``rate.squeeze(-1)``)."""
        import torch

        flat = tensor.detach().reshape(-1)
        for output, qual, kind, at in self.made:
            if output.numel() == flat.numel() and torch.equal(output.reshape(-1), flat):
                return qual, kind, at
        return None

    def __init__(self) -> None:
        self.module: tuple[str, str, bool] | None = None
        self.op: tuple[str, Any, str] | None = None
        self.output: Any = None
        self.made: list[tuple[Any, str, str, Any]] = []


def _tensors(values: Any, out: list[Any], depth: int = 0) -> list[Any]:
    import torch

    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif depth < 2 and isinstance(value, (list, tuple)):
            _tensors(value, out, depth + 1)
    return out


def _finite(tensor: Any) -> bool:
    import torch

    if not tensor.is_floating_point() or tensor.device.type != "cpu" or not tensor.numel():
        return True
    return bool(torch.isfinite(tensor).all())


def _singular(name: str, args: tuple, kwargs: dict, output: Any) -> str:
    """What makes the derivative of op ``name`` at these finite values infinite or undefined,
    or "" (the op's own value is finite)."""
    import torch

    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if x is None or not x.is_floating_point() or x.device.type != "cpu":
        return ""
    base = name.strip("_").removeprefix("r")
    if base in ("sqrt", "sqrt_") and bool((x == 0).any()):
        return "sqrt of 0, whose derivative 1/(2*sqrt(x)) is infinite there"
    if base in ("acos", "asin", "arccos", "arcsin") and bool((x.abs() == 1).any()):
        return f"{base} at +-1, whose derivative is infinite there"
    if name in ("pow", "pow_", "__pow__"):
        e = args[1] if len(args) > 1 else kwargs.get("exponent")
        if isinstance(e, (int, float)) and 0 < e < _FRACTIONAL and bool((x == 0).any()):
            return f"x ** {e} at 0, whose derivative is infinite there"
    return ""


_FILLS = frozenset(("masked_fill", "masked_fill_", "fill_", "full", "full_like", "where"))
_INF = float("inf")


def _inf_mask(name: str, args: tuple, kwargs: dict, outs: list) -> bool:
    """A fill with an explicit infinity (``logits.masked_fill(~allowed, float("-inf"))``, a
    causal mask): infinities on purpose, and no NaN."""
    return name in _FILLS and any(isinstance(a, float) and a in (_INF, -_INF) for a in (
        *args, *kwargs.values())) and not any(bool(o.isnan().any()) for o in outs)


def _mode(found: Rerun, singular: bool) -> Any:
    from torch.overrides import TorchFunctionMode

    class FirstNonFinite(TorchFunctionMode):
        """Notes the first op that made a non-finite value from finite inputs, with its line."""

        def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                               kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            output = func(*args, **kwargs)
            if found.op is not None:
                return output
            try:
                name = getattr(func, "__name__", "") or str(func)
                outs = _tensors(output if isinstance(output, (tuple, list)) else (output,), [])
                what = ""
                if any(not _finite(o) for o in outs):
                    if all(_finite(t) for t in _tensors((*args, *kwargs.values()), [])) and \
                            not _inf_mask(name, args, kwargs, outs):
                        what = "made NaN/Inf from finite inputs"
                elif singular:
                    what = _singular(name, args, kwargs, output)
                if what:
                    found.op = (name, user_location(sys._getframe(1)), what)
            except Exception:  # a diagnosis aid only
                pass
            return output

    return FirstNonFinite()


def rerun(model: Any, args: list[Any], kwargs: dict[str, Any] | None = None, *,
          singular: bool = False, record: bool = False, watch: Any = None) -> Rerun:
    """Run ``model`` once more on ``args`` (and ``kwargs``) without grad, RNG forked and buffers
    swapped for copies; see :class:`Rerun` for what it returns. ``singular``: also note the first
    op evaluated at a singular point of its derivative; ``record``: keep every submodule's output
    with the user's line that called it (``Rerun.made``); ``watch``: a tracer's mode, also on."""
    import torch

    found = Rerun()

    def make_hook(qual: str) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            if not isinstance(output, torch.Tensor) or not output.is_floating_point():
                return None
            if record:
                found.made.append((output, qual, type(module).__name__,
                                   user_location(sys._getframe(1))))
            if found.module is None and not bool(torch.isfinite(output).all()):
                bad = any(not bool(torch.isfinite(p).all()) for p in module.parameters(recurse=False))
                found.module = (qual, type(module).__name__, bad)
            return None
        return hook

    devices = sorted({a.device.index or 0 for a in args if getattr(a, "is_cuda", False)})
    handles = []
    # Buffers (BatchNorm running statistics) are swapped for copies during the re-run and the
    # originals put back untouched: an in-place restore would bump their version counters and break
    # the backward about to run through the user's graph.
    swapped = [(module, name, buf) for module in model.modules()
               for name, buf in module._buffers.items() if buf is not None]
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            for module, name, buf in swapped:
                module._buffers[name] = buf.clone()
            for qual, module in model.named_modules():
                if module is not model:
                    handles.append(module.register_forward_hook(make_hook(qual)))
            with _mode(found, singular), (watch or contextlib.nullcontext()):
                found.output = type(model)._call_impl(model, *args, **(kwargs or {}))
    except Exception:
        found.output = None
    finally:
        for h in handles:
            h.remove()
        for module, name, buf in swapped:
            module._buffers[name] = buf
    return found


# node type -> (saved attribute, test on it, what it means)
_SINGULAR_NODES: dict[str, tuple[str, str, str]] = {
    "LogBackward0": ("_saved_self", "zero", "log of 0 is -inf"),
    "Log2Backward0": ("_saved_self", "zero", "log2 of 0 is -inf"),
    "Log10Backward0": ("_saved_self", "zero", "log10 of 0 is -inf"),
    "SqrtBackward0": ("_saved_result", "zero", "sqrt of 0 has an infinite derivative"),
    "RsqrtBackward0": ("_saved_self", "zero", "rsqrt of 0 is inf"),
    "DivBackward0": ("_saved_other", "zero", "a division by 0"),
    "ReciprocalBackward0": ("_saved_result", "inf", "the reciprocal of 0 is inf"),
    "AcosBackward0": ("_saved_self", "one", "acos at +-1 has an infinite derivative"),
    "AsinBackward0": ("_saved_self", "one", "asin at +-1 has an infinite derivative"),
}


def singular_node(root: Any, stop: Any = None, limit: int = GRAPH_NODES) -> tuple[Any, Any, str] | None:
    """``(node, saved input, what it means)`` of a node in the graph below ``root`` (a tensor
    whose graph is intact) whose saved input is at a singular point (``LogBackward0`` of an input
    holding 0, ``DivBackward0`` by 0, ...), the one nearest the graph's leaves; None when there is
    none (CPU tensors only; at most ``limit`` nodes walked, stopping where ``stop(node)``)."""
    import torch

    if root is None or root.grad_fn is None:
        return None
    hits: list[tuple[Any, Any, str]] = []
    carried: list[tuple[Any, Any, str]] = []  # a product with a value already inf/NaN
    for node in graph_nodes(root.grad_fn, limit=limit, stop=stop):
        entry = _SINGULAR_NODES.get(type(node).__name__)
        if entry is None:
            if type(node).__name__ == "MulBackward0" and not hits:
                carried += _non_finite_factor(node)
            continue
        attr, test, what = entry
        try:
            saved = getattr(node, attr)
        except Exception:  # freed by an earlier backward
            continue
        if not isinstance(saved, torch.Tensor) or saved.device.type != "cpu" or not saved.numel() \
                or not (saved.is_floating_point() or test == "zero"):
            continue  # (an integer count as a divisor: `x.sum(1) / mask.sum(1)`)
        if test == "zero":
            bad = bool((saved == 0).any())
        elif test == "one":
            bad = bool((saved.abs() == 1).any())
        else:
            bad = not bool(torch.isfinite(saved).all())
        if bad:
            hits.append((node, saved, what))
    return hits[-1] if hits else carried[-1] if carried else None


def _non_finite_factor(node: Any) -> list[tuple[Any, Any, str]]:
    """``[(node, factor, what)]`` when a ``MulBackward0`` saved a floating CPU factor holding
    inf/NaN: a value made non-finite before the product (``torch.log`` of data holding 0, which
    no graph node records when the data needs no gradient) that it carries into the loss
    (``0 * -inf`` is NaN)."""
    import torch

    for attr in ("_saved_other", "_saved_self"):
        try:
            saved = getattr(node, attr)
        except Exception:  # freed, or not saved for this product
            continue
        if isinstance(saved, torch.Tensor) and saved.device.type == "cpu" and saved.numel() \
                and saved.is_floating_point() and not bool(torch.isfinite(saved).all()):
            return [(node, saved, "a product with a factor that is already inf or NaN (0 * inf "
                                  "is NaN): a value made non-finite before it, such as the log "
                                  "of data holding 0")]
    return []


def scaler_in_use() -> bool:
    """Whether a live, enabled ``torch.amp.GradScaler`` exists (rare path only: one collection, so
    that an earlier run's scaler only reference cycles keep does not count, and one heap scan)."""
    try:
        from torch.amp import GradScaler
    except ImportError:
        return False
    gc.collect()
    return any(o.is_enabled() for o in live_objects(lambda o: GradScaler in type(o).__mro__))


def finite_output(said: str, out: Any) -> str:
    """The cause when the model's output ``out`` was finite: too large to square in its dtype,
    or else made non-finite by the loss computation."""
    import torch

    largest = float(out.detach().abs().max()) if out.numel() else 0.0
    limit = math.sqrt(torch.finfo(out.dtype).max)
    if largest > limit:
        return (f"; {said} but reached {largest:.3g} in magnitude: the loss computation "
                f"overflowed ({out.dtype} squares only values up to {limit:.2g})")
    return (f"; {said}, so the loss computation made it non-finite (log of 0, division by zero, "
            "sqrt of a negative)")


def stamped_calls(root: Any, state: Any) -> list[Any]:
    """The :class:`~trainguard.sanitize.core.records.Made` stamps of the outermost module calls whose
    outputs the graph of ``root`` holds (the walk stops at each stamp), latest first. When the
    graph holds none (a loss on a tuple's or dict's output beyond the few that are stamped), the
    latest outermost training forward alone: the latest live stamp, or ``State.last_multi`` when
    that call is later. Run once, at the first non-finite loss."""
    found: list[Any] = []

    def stamped(node: Any) -> bool:
        meta = node_metadata(node)
        made = meta.get(MADE) if meta else None
        if made is None or made.model_id is None:
            return False
        found.append(made)
        return True

    if root is not None and root.grad_fn is not None:
        for _ in graph_nodes(root.grad_fn, stop=stamped):
            pass
    if found:
        return sorted(found, key=lambda made: made.order, reverse=True)
    latest = next((made for made in (ref() for ref in reversed(state.stamps))
                   if made is not None and made.model_id is not None), None)
    multi = state.last_multi
    if multi is not None and (latest is None or multi[0] > latest.order):
        order, model_id, module, where, inputs, named = multi
        return [Made(0, 0, where, module, order, model_id, inputs, None, named)]
    return [latest] if latest is not None else []


def is_stamped(node: Any) -> bool:
    """Whether autograd ``node`` made an outermost module call's output (the walk stops there)."""
    meta = node_metadata(node)
    made = meta.get(MADE) if meta else None
    return made is not None and made.model_id is not None


def scaled_root_is_non_finite(root: Any, value: float) -> bool:
    """Whether the loss behind ``root``, a CPU backward root made by ``GradScaler.scale()`` as
    ``loss * scale`` on a settled step (no loss call recorded), is non-finite; ``value`` is the
    root's value, already read and non-finite."""
    import torch

    # A settled step: no loss call was recorded. GradScaler.scale() made the root as
    # loss * scale (scale finite and positive), so a NaN root means a NaN loss. An infinite
    # root means a loss beyond the dtype's largest value divided by the scale: with the
    # default scale (65536) and float32, beyond ~5e33, an infinite loss in all but name;
    # with a huge scale (or float16/bfloat16) the product may overflow by design.
    node = root.grad_fn
    if node is None or type(node).__name__ != "MulBackward0":
        return False
    if math.isnan(value):
        return True
    if root.dtype not in (torch.float32, torch.float64):
        return False
    scale = getattr(node, "_saved_other", None)  # the scale tensor, saved by the product
    if isinstance(scale, torch.Tensor) and scale.numel() == 1:
        factor = float(scale)
        return factor > 0 and torch.finfo(root.dtype).max / factor > _HUGE_LOSS
    return True


def non_finite_grads(optimizer: Any, model_refs: Any) -> list[Any]:
    """The parameters of ``optimizer`` whose ``.grad`` holds NaN/Inf, by their name in one of the
    models (weak references ``model_refs``), else by shape. Rare path only."""
    import torch

    names = {id(p): n for ref in model_refs if ref() is not None
             for n, p in ref().named_parameters()}
    return [names.get(id(p), tuple(p.shape)) for group in optimizer.param_groups
            for p in group["params"]
            if p.grad is not None and not bool(torch.isfinite(p.grad).all())]


def grads_may_be_finite(grads: list[Any]) -> bool:
    """False when ``grads`` (CPU floating tensors, not sparse) hold a NaN or an Inf, or when the
    test's sum overflowed (the caller confirms per tensor, :func:`non_finite_grads`); else True.

    One op per set, not one per tensor: up to ``_JOINED`` values in all, the gradients are
    joined into one vector (``_flatten_dense_tensors``: one call, not a ``reshape`` per tensor)
    and summed, in their own dtype when that is float32 or float64 (a float32 sum overflows
    only past 3e38), else in float64 (a half-precision sum overflows at 65504); NaN and Inf
    carry through a sum. Past it, where the values cost more than the per-tensor dispatch and a
    copy would be large, their largest magnitudes (``torch._foreach_norm(grads, inf)``) are
    summed. Reads the gradients, changes nothing."""
    import torch
    from torch._utils import _flatten_dense_tensors

    values = 0
    for g in grads:  # (a plain loop: a checked step's cost)
        values += g.numel()
    if values <= _JOINED:
        joined = _flatten_dense_tensors(grads)
        if joined.dtype is torch.float32 or joined.dtype is torch.float64:
            total = joined.sum().item()
        else:
            total = joined.sum(dtype=torch.float64).item()
    else:
        norms = torch._foreach_norm(grads, float("inf"))  # max |g|: NaN or inf only if one is
        dtype = grads[0].dtype
        if any(g.dtype != dtype for g in grads):
            norms = [n.to(dtype) for n in norms]
        total = torch.stack(norms).sum().item()  # note: a sync on a checked step only (CPU)
    return total - total == 0.0  # finite (inf - inf and NaN - NaN are NaN)
