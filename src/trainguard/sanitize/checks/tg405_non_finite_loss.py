"""TG405 non-finite-loss: the loss became NaN or Inf.

What it watches: the root of every ``backward()`` when it is a single value (the loss), read by its
device type (``sanitize/core/values.py``). On the CPU its value is read (``.item()``, about a
microsecond). On CUDA a ``torch.isfinite`` flag is copied to pinned memory without blocking, and
read at a later backward once its CUDA event has completed, so the check never waits for the GPU.
On any other device (``meta``, which has no values; ``xla``) the loss is not read. The watcher's stamp on each outermost training output (its
``grad_fn``'s ``Made``) holds weak references to the call's tensor arguments and to the output.

When it fires: the first non-finite loss. The finding names the optimizer step and backward line,
and then looks once for the cause (only now, never on a healthy step), in the outermost calls
whose stamped outputs the loss's graph holds, from the latest on (when it holds none, the latest
outermost training forward), naming the first that made a non-finite value:
- the input batch already holds NaN/Inf; when that input is another outermost call's output (an
  encoder's, a generator's, also detached: the same memory), that call is examined in turn;
- the model's output was finite, so the loss computation itself made the value (``log(0)``, a
  division by zero, a target out of range), said when no call made a non-finite value;
- otherwise the call's forward is re-run once on the same batch (its keyword arguments too) under
  ``torch.no_grad()``, with the RNG state forked and every buffer (BatchNorm running statistics)
  swapped for a copy (the originals are never touched, so the backward about to run is
  unaffected), and with forward hooks that name the first module whose output is non-finite,
  saying whether its own parameters were already non-finite.
Reported once per run (every later step is non-finite too). On the CPU the first and the latest
finite loss are kept (two numbers), so a loss that grew by 1000x, or beyond 1e6, before it
overflowed is said to have diverged (too large a learning rate, inputs or targets on large
scales), and a finite output too large to square in its dtype (above 1.8e19 in float32) is named
as what overflowed, instead of the log/division/sqrt causes.

With a ``GradScaler`` the root of backward is the scaled loss, which may overflow by design (the
scaler then skips the step and lowers its scale). So a non-finite root is confirmed, only then,
by looking once for a live enabled ``GradScaler`` (``gc``); with one, the unscaled loss (the output
of the last loss module or functional loss, weakly held) must be non-finite too, and without a
loss call nothing is reported.

Settled steps (``sanitize/core/cadence.py``): every forward is recorded and the loss of every backward
read, so the finding names the exact step, with its cause. Under a ``GradScaler`` no loss call of
a settled step is recorded; the root is ``loss * scale`` with a finite positive scale, so a NaN
root is a NaN loss, and an infinite root counts only in float32/64 and only when the loss must
exceed 1e30 for the product to overflow (the dtype's largest value divided by the scale, read from
the product's saved factor: about 5e33 with the default scale of 65536; a huge ``init_scale`` such
as 3e38 overflows with a loss of 1.2, and is not reported).

Silent on: finite losses, scaled losses that overflow while the loss itself is finite. Gradients that overflow while the loss is finite (fp16 with a
``GradScaler`` skipping steps) are not this check's concern.

Cost: per backward, settled steps too, one value read (CPU) or one non-blocking copy of a flag
(CUDA, 64 pending at most); no read on other devices. Once, at the first non-finite loss: one walk
of the loss's graph down to the stamps of the calls it holds (20,000 nodes at most), 4 calls
examined (2 levels upstream each), each at most one re-run of its forward, 64 stamps compared by
storage, and one scan of the heap for a GradScaler (``bounds.live_objects``).

Reference: ``torch.autograd.detect_anomaly`` (the expensive way to find the op)
https://pytorch.org/docs/stable/autograd.html#anomaly-detection; GitHub issue
https://github.com/karpathy/nanoGPT/issues/136.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from trainguard.sanitize.core.bounds import live_objects
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.graph import graph_nodes, node_metadata, stamp_by_storage, stamp_of
from trainguard.sanitize.core.records import MADE, Made
from trainguard.sanitize.core.values import READ_LATER, reading

_MAX_ROOT = 1  # only scalar roots: a loss
_CALLS = 4  # outermost calls in the loss's graph examined at most
_UPSTREAM = 2  # levels of calls whose output was another's non-finite input followed at most
_DIVERGED_AT = 1e6  # a finite loss this large before the overflow: the run diverged
_DIVERGED_GROWTH = 1e3  # ... or one that grew this much since the first step
_HUGE_LOSS = 1e30  # a scaled loss that overflowed counts as an infinite loss when the loss must exceed this


class NonFiniteLoss(Check):
    code = "TG405"
    stamps = "inputs"  # outputs stamped, with weak references to the call's tensor arguments
    always = ("on_backward",)  # every step is looked at, settled ones too

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.done = False
        # the stamps on outermost outputs hold weak references to the call's tensor arguments and
        # output (Made.inputs, Made.output), for the re-run
        self.pending: list[tuple] = []  # CUDA: (host flag, event, step, where)
        self.scaled: bool | None = None  # a GradScaler is in use (looked up at the first non-finite root)
        self.last_loss: Any = None  # weakref to the last loss output, used under a GradScaler
        # CPU: (optimizer step, value, backward line) of the first finite loss
        self.first: tuple | None = None
        self.latest: tuple | None = None  # ... and the latest one

    def on_loss(self, call: Any) -> None:
        out = call.output
        self.last_loss = weakref.ref(out) if hasattr(out, "numel") else None

    def on_backward(self, call: Any) -> None:
        if self.done:
            return
        if self.pending:
            self._poll()
        roots = call.tensors
        if len(roots) != 1:
            return
        root = roots[0]
        if root.numel() != _MAX_ROOT:
            return
        if not root.is_cpu:  # (the usual case first: reading() without a call)
            if reading(root) == READ_LATER and root.is_floating_point():
                self._queue(root, call)
            return  # (meta and other devices: no value to read)
        value = root.item()
        if type(value) is not float:  # a complex root (backward roots are never integers)
            return
        if value - value == 0.0:  # finite (inf - inf and NaN - NaN are NaN): math.isfinite
            self.latest = (self.state.step + 1, value, call.where)
            if self.first is None:
                self.first = self.latest
        elif self._loss_is_non_finite(root, value):
            self._found(value, self.state.step + 1, call.where, root=root)

    def _loss_is_non_finite(self, root: Any = None, value: float = 0.0) -> bool:
        """Under a GradScaler, whether the unscaled loss is non-finite too (rare path only).
        ``root``/``value``: the CPU backward root and its value, read by the caller."""
        if self.scaled is None:
            self.scaled = _scaler_in_use()
        if not self.scaled:
            return True
        import torch

        if root is not None and self.bus.cadence.skipping:
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
        loss = self.last_loss() if self.last_loss is not None else None
        if loss is None or not loss.is_floating_point() or loss.numel() != 1:
            return False
        return not bool(torch.isfinite(loss.detach()))  # note: a sync, only on this path

    def _queue(self, root: Any, call: Any) -> None:
        import torch

        host = torch.empty((), dtype=torch.bool, pin_memory=True)
        host.copy_(torch.isfinite(root.detach()), non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self.pending.append((host, event, self.state.step + 1, call.where))
        if len(self.pending) > 64:  # the GPU is far behind: wait for the oldest
            self.pending[0][1].synchronize()
            self._poll()

    def _poll(self) -> None:
        while self.pending and self.pending[0][1].query():
            host, _, step, where = self.pending.pop(0)
            if not bool(host) and self._loss_is_non_finite():
                self.pending.clear()
                self._found(float("nan"), step, where, exact=False)
                return

    def on_exit(self) -> None:
        if self.pending and not self.done:
            self.pending[-1][1].synchronize()
            self._poll()
        self.pending.clear()

    def _found(self, value: float, step: int, where: Any, *, exact: bool = True,
               root: Any = None) -> None:
        self.done = True
        what = f"the loss is {value}" if exact else "the loss is NaN or Inf"
        cause = self._cause(root) if exact else ""  # (on CUDA the graph is gone by now)
        diverged = self._diverged(where)
        # Without a scaler the step writes NaN into the weights, so every later step is NaN too;
        # a GradScaler finds the non-finite gradients and skips that step instead.
        after = ("the GradScaler skips every step whose gradients are not finite, so such batches "
                 "do not train the model, and each skip lowers the scale" if self.scaled
                 else "every step after it trains on NaN")
        if diverged:
            fix = ("lower the learning rate, normalize the inputs and regression targets (zero "
                   "mean, unit variance), or clip gradients")
        else:
            fix = ("lower the learning rate or clip gradients, check the named module and the "
                   "inputs for NaN/Inf, add an epsilon inside log/sqrt/division")
        self.report(
            f"{what} at optimizer step {step} (backward at {short_location(where)}){diverged}"
            f"{cause}; {after}", fix=fix, where=where)

    def _diverged(self, where: Any) -> str:
        """The loss's growth before it overflowed, when it grew by 1000x or beyond 1e6 (CPU
        losses of the same backward line only, so a GAN's two losses are not compared; without a
        GradScaler, whose scaled roots change by design); else ""."""
        if self.first is None or self.latest is None or self.scaled:
            return ""
        (s0, v0, w0), (s1, v1, w1) = self.first, self.latest
        if not w0 == w1 == where:
            return ""
        if abs(v1) < _DIVERGED_AT and abs(v1) < _DIVERGED_GROWTH * max(abs(v0), 1e-12):
            return ""
        if s0 == s1:
            return f", after a loss of {v1:.3g} at step {s1}: training diverged"
        return (f", after the loss grew from {v0:.3g} at step {s0} to {v1:.3g} at step {s1}: "
                "training diverged")

    def _cause(self, root: Any) -> str:
        """Why the loss ``root`` (a CPU backward root whose graph is intact) is non-finite: the
        outermost calls whose stamped outputs its graph holds are examined from the latest on
        (else the latest outermost training forward), and the first that made a non-finite value
        is named; when none did, what the latest one says (its output was finite). "" when nothing
        is found."""
        first = ""
        for made in _stamped_calls(root, self.state)[:_CALLS]:
            said, non_finite = self._explain(made, _UPSTREAM)
            if non_finite:
                return said
            first = first or said
        return first

    def _explain(self, made: Any, upstream: int) -> tuple[str, bool]:
        """What the outermost call that ``made`` stamps tells about the non-finite loss, and
        whether that call itself made a non-finite value: its input (when that input is another
        stamped call's output, that call is examined in turn, ``upstream`` levels at most), its
        output, or a re-run of its forward."""
        import torch

        if made is None or made.inputs is None:
            return "", False
        ref = self.state.models._refs.get(made.model_id)
        model = ref() if ref is not None else None
        arg_refs = [r() for r in made.inputs]
        named = {k: (v() if isinstance(v, weakref.ref) else v)
                 for k, v in (made.kwargs or {}).items()}
        if (model is None or type(model).__name__ != made.module
                or any(a is None for a in arg_refs)
                or any(v is None and isinstance(made.kwargs[k], weakref.ref)
                       for k, v in named.items())):
            return "", False
        out_ref, fwd_where = made.output, made.where
        name = type(model).__name__
        tensors = [*arg_refs, *(v for v in named.values() if isinstance(v, torch.Tensor))]
        with torch.no_grad():
            bad = [a for a in tensors
                   if a.is_floating_point() and not bool(torch.isfinite(a).all())]
            if bad:
                said = (f"; the input batch given to {name} at {short_location(fwd_where)} "
                        "already holds NaN/Inf")
                earlier = stamp_of(bad[0]) or stamp_by_storage(bad[0], self.state.stamps)
                if upstream > 0 and earlier is not None and earlier is not made:
                    why, found = self._explain(earlier, upstream - 1)
                    if found:
                        return (f"{said}: it is {earlier.module}'s output at "
                                f"{short_location(earlier.where)}"
                                f"{'' if bad[0].grad_fn is not None else ', detached'}{why}"), True
                return said, True
            out = out_ref() if out_ref is not None else None
            if out is not None and out.is_floating_point() and bool(torch.isfinite(out).all()):
                return _finite_output(
                    f"{name}'s output at {short_location(fwd_where)} was finite", out), False
        self.state.modules.append(model)  # inner calls of the re-run are not outermost forwards
        try:
            found, output = _rerun(model, arg_refs, named)
        finally:
            self.state.modules.pop()
        if found is None:
            # the output itself was freed (a temporary passed on): the re-run's stands for it
            if isinstance(output, torch.Tensor) and output.is_floating_point() \
                    and bool(torch.isfinite(output).all()):
                return _finite_output(
                    f"re-running {name}'s forward from {short_location(fwd_where)} on the same "
                    "batch gives a finite output", output), False
            return "", False
        module_name, kind, params_bad = found
        whose = " whose own parameters are already non-finite" if params_bad else ""
        return (f"; re-running {name}'s forward from {short_location(fwd_where)} on the same "
                f"batch, the first module whose output is non-finite is `{module_name}` "
                f"({kind}){whose}"), True


def _stamped_calls(root: Any, state: Any) -> list[Any]:
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


def _scaler_in_use() -> bool:
    try:
        from torch.amp import GradScaler
    except ImportError:
        return False
    return any(o.is_enabled() for o in live_objects(lambda o: GradScaler in type(o).__mro__))


def _finite_output(said: str, out: Any) -> str:
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


def _rerun(model: Any, args: list[Any],
           kwargs: dict[str, Any] | None = None) -> tuple[tuple[str, str, bool] | None, Any]:
    """Run ``model`` once more on ``args`` (and ``kwargs``) without grad, RNG forked and buffers
    swapped for copies;
    return the first module (execution order) whose output is non-finite, or None, and the
    re-run's output (None when it raised)."""
    import torch

    first: list[tuple[str, str, bool]] = []

    def make_hook(qual: str) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            if first or not isinstance(output, torch.Tensor) or not output.is_floating_point():
                return None
            if not bool(torch.isfinite(output).all()):
                bad = any(not bool(torch.isfinite(p).all()) for p in module.parameters(recurse=False))
                first.append((qual, type(module).__name__, bad))
            return None
        return hook

    devices = sorted({a.device.index or 0 for a in args if a.is_cuda})
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
            output = type(model)._call_impl(model, *args, **(kwargs or {}))
    except Exception:
        return None, None
    finally:
        for h in handles:
            h.remove()
        for module, name, buf in swapped:
            module._buffers[name] = buf
    return (first[0] if first else None), output
