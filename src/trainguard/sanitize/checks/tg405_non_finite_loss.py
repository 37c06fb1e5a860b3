"""TG405 non-finite-loss: the loss or a gradient became NaN or Inf.

Watched, settled steps too: the root of every ``backward()`` that is a single value; every
outermost module output that is a scalar with a graph (a model returning its loss); every loss
call's CPU output (a NaN one is kept until a backward takes it, and at the exit is a run that
stopped on it: ``if not torch.isfinite(loss): return``). Values are read per device
(``core/values.py``; CUDA: a window of 16 losses on the device, read later). On checked steps the
gradients are tested in one op before ``optimizer.step()``. Fires once per run, at the cause:
- the first non-finite loss: a loss call's target holding NaN/Inf, named (the data:
  ``core/nonfinite_data.py``); else the outermost calls whose stamped outputs the loss holds are
  examined, latest first (``core/nonfinite.py``): an input batch already NaN/Inf (followed to
  the call that made it, 2 levels); else the forward re-run once (no grad, RNG forked, buffers
  copied) naming the first non-finite module and first op making NaN/Inf, at its user line (at
  the line that set its epsilon guard when that is 0: ``core/zero_guard.py``). When every call's
  output was finite, the loss computation made it: a graph node whose saved input sits at its
  singular point (log of 0, division by 0) is named, with the submodule
  that made that input when it is a model's output (a ReLU head's exact zeros); else the finding
  waits one cycle for that op's line (``core/node_lines.py``; a run that ended first: the loss
  code's one unguarded such op), or the line of the clamp below it whose bound is the singular
  point only by rounding (``1 - 1e-8`` is 1.0 in float32: ``core/lost_margin.py``), or the op
  that made a product's NaN/Inf factor (``core/nonfinite_trail.py``). Non-finite parameters after
  a finite loss (an unchecked step's gradient) are placed like a NaN gradient;
- the loss diverged first (grew 1000x, or beyond 1e6, on the CPU): at the line that set the LR;
- a gradient is NaN/Inf while the loss is finite: the latest outermost call re-run, naming the
  first op at a singular point of its derivative (sqrt at 0, acos at +-1) and its line; else the
  loss code's one unguarded such op or ops of one value (``core/singular_sites.py``); else backward.
With a ``GradScaler`` a non-finite root needs a live enabled scaler (``gc``, once) and a non-finite
unscaled loss. Silent on: finite losses and gradients; scaled losses that overflow while the loss
is finite; gradients under a GradScaler; a norm of a zero vector (a zero subgradient); NaN losses
the script skips (a backward of a later loss follows; then also one the run ends on). Cost: per
backward and per CPU loss one value read; per outermost call a type test; per checked step one sum
over the gradients. Once, at the finding: one graph walk (20,000 nodes), 4 re-runs at most, one
heap scan, one parse, one cycle. Reference: https://pytorch.org/docs/stable/autograd.html
(``detect_anomaly``); karpathy/nanoGPT#136."""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.graph import stamp_by_storage, stamp_of
from trainguard.sanitize.core.lost_margin import lost_margin
from trainguard.sanitize.core.node_lines import NodeLine
from trainguard.sanitize.core.nonfinite_data import DATA_FIX, bad_target, data_cause
from trainguard.sanitize.core.params import shown_names
from trainguard.sanitize.core.nonfinite import (
    finite_output, grads_may_be_finite, is_stamped, non_finite_grads, rerun,
    scaled_root_is_non_finite, scaler_in_use, singular_node, stamped_calls)
from trainguard.sanitize.core.setting import DIVERGED_FIX, diverged, learning_rate_line
from trainguard.sanitize.core.singular_sites import live_models, one_singular_site
from trainguard.sanitize.core.values import READ_LATER, DeviceLosses, reading
from trainguard.sanitize.core.zero_guard import zero_guard

_MAX_ROOT = 1  # only scalar roots: a loss
_CALLS = 4  # outermost calls in the loss's graph examined at most
_UPSTREAM = 2  # levels of calls whose output was another's non-finite input followed at most


class NonFiniteLoss(Check):
    code = "TG405"
    stamps = "inputs"  # outputs stamped, with weak references to the call's tensor arguments
    always = ("on_backward", "on_root_forward", "on_loss")  # settled steps too

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.done, self.bad_data = False, None  # bad_data: a NaN loss's target held NaN/Inf
        self.pending = DeviceLosses()  # CUDA: losses whose values are not read yet
        self.scaled: bool | None = None  # a GradScaler is in use (looked up at the first non-finite root)
        self.last_loss: Any = None  # weakref to the last loss output, used under a GradScaler
        self.first: tuple | None = None  # CPU: (step, value, backward line), first finite loss
        self.latest: tuple | None = None  # ... and the latest one
        self.cause_at: Any = None  # the user's line that made the first non-finite value
        self._tensor = __import__("torch").Tensor
        self.built: list[tuple[Any, Any]] = []  # (weakref to an optimizer, where it was built)
        self.node_line: Any = None  # the loss op at fault, whose line the next cycle gives
        self.params_bad = False  # a re-run found a module whose own parameters were NaN/Inf
        self.unused: tuple | None = None  # (value, step, line, loss): a NaN loss before backward
        self.skips = False  # a backward came after one: the script skips them

    def on_built(self, obj: Any, where: Any) -> None:
        if isinstance(obj, __import__("torch").optim.Optimizer):
            self.built = [b for b in self.built if b[0]() is not None][-7:]
            self.built.append((weakref.ref(obj), where))

    def on_root_forward(self, call: Any) -> None:
        # A scalar output with a graph is a loss (a loss module, a model returning its loss): a
        # NaN there is seen before any backward (``if not torch.isfinite(loss): break``).
        if self.node_line is not None:  # a held finding: the loss made from this output
            self.node_line.start()
        out = call.output
        if out.__class__ is not self._tensor or out.ndim or out.grad_fn is None \
                or self.done or not out.is_cpu:
            return
        value = out.item()
        if type(value) is float and value - value != 0.0:  # (an unscaled loss: no GradScaler test)
            self.scaled = scaler_in_use() if self.scaled is None else self.scaled
            plain = all(isinstance(a, (self._tensor, tuple, int, float)) for a in call.args)
            rerun = self._rerun(call.module, list(call.args), dict(call.kwargs)) if plain \
                else None  # (the loss module's own op: x.sum() / count at 0)
            self._found(value, self.state.step + 1, call.where, root=out,
                        made_by=type(call.module).__name__, rerun=rerun)

    def on_loss(self, call: Any) -> None:
        out = call.output
        self.last_loss = weakref.ref(out) if hasattr(out, "numel") else None
        if out.__class__ is not self._tensor or out.ndim or out.grad_fn is None or self.done \
                or self.unused is not None or not out.is_cpu:
            return
        value = out.item()
        if type(value) is float and value - value != 0.0:
            self.unused = (value, self.state.step + 1, call.where, out, call.name)
            self.bad_data = bad_target(call)  # (the target held NaN/Inf: the data's fault)

    def on_backward(self, call: Any) -> None:
        # (a NaN loss skipped by the script, ``continue``: the run goes on, guarded)
        self.skips, self.unused = self.skips or self.unused is not None, None
        if self.node_line is not None and self.node_line.held is not None:
            held = self.node_line.at_backward(call.tensors, call.where)
            if held is not None:
                self.report(held[0], fix=held[1], where=held[2])
        if self.done:
            return
        if self.pending.sent:  # (a list's truth: no Python call on the CPU's every backward)
            self._poll()
        roots = call.tensors
        if len(roots) != 1:
            return
        root = roots[0]
        if root.numel() != _MAX_ROOT:
            return
        if not root.is_cpu:  # (the usual case first: reading() without a call)
            if reading(root) == READ_LATER and root.is_floating_point():
                self.pending.add(root, self.state.step + 1, call.where)  # read at a later one
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

    def on_step_pre(self, optimizer: Any) -> None:
        # Checked steps only: a NaN/Inf gradient while the loss was finite (a singular derivative)
        if self.done or self.scaled:
            return
        grads = []
        for group in optimizer.param_groups:  # (plain loops: no generator per checked step)
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    if not g.is_cpu or g.is_sparse or not g.is_floating_point():
                        return
                    grads.append(g)
        if not grads or grads_may_be_finite(grads):  # (an overflowing sum: confirmed below)
            return
        self.scaled = scaler_in_use() if self.scaled is None else self.scaled
        if not self.scaled:
            self._bad_gradients(optimizer)

    def _loss_is_non_finite(self, root: Any = None, value: float = 0.0) -> bool:
        """Under a GradScaler, whether the unscaled loss is non-finite too (rare path only).
        ``root``/``value``: the CPU backward root and its value, read by the caller."""
        self.scaled = scaler_in_use() if self.scaled is None else self.scaled
        if not self.scaled:
            return True
        import torch

        if root is not None and self.bus.cadence.skipping:
            return scaled_root_is_non_finite(root, value)  # (a settled step: no loss call seen)
        loss = self.last_loss() if self.last_loss is not None else None
        if loss is None or not loss.is_floating_point() or loss.numel() != 1:
            return False
        return not bool(torch.isfinite(loss.detach()))  # note: a sync, only on this path

    def _poll(self) -> None:
        bad = self.pending.first_non_finite()
        if bad is not None and self._loss_is_non_finite():
            self.pending.clear()
            self._found(float("nan"), *bad, exact=False)

    def on_exit(self) -> None:
        if self.unused is not None and not self.done and not self.skips:  # none taken, none skipped
            value, step, where, root, name = self.unused
            self._found(value, step, where, root=root, made_by=name, ended=True)
        held = self.node_line.flush() if self.node_line is not None else None
        if held is not None:  # the run ended before the op's line came
            self.report(held[0], fix=held[1], where=held[2])
        if self.pending and not self.done:
            self.pending.flush()
            self._poll()
        self.pending.clear()

    def _found(self, value: float, step: int, where: Any, *, exact: bool = True, root: Any = None,
               made_by: str = "", rerun: Any = None, ended: bool = False) -> None:
        self.done = True
        what = f"the loss is {value}" if exact else "the loss is NaN or Inf"
        data, self.cause_at = data_cause(self.bad_data, root), None  # (data: the target held NaN)
        cause = data or (self._op(rerun) if rerun is not None else "")
        cause = cause or (self._cause(root) if exact else "")  # (CUDA: the graph is gone)
        diverged = "" if data else self._diverged(where)
        lr_at = learning_rate_line(self.built) if diverged else None
        if lr_at is not None:  # the cause is the learning rate: the line that set it
            self.cause_at = lr_at
            diverged += f" (learning rate set at {short_location(lr_at)})"
        if self.params_bad and self.latest and not diverged and self.cause_at is None:
            site = self._site(self.latest[2])  # an unchecked step's gradient made the weights NaN
            cause += site and (f": the step after a finite loss ({self.latest[1]:.4g} at step "
                               f"{self.latest[0]}) wrote NaN/Inf into them, from gradients that "
                               f"were not finite{site}")
        # Without a scaler the step writes NaN into the weights; a GradScaler skips that step.
        after = ("the GradScaler skips every step whose gradients are not finite, so such batches "
                 "do not train the model, and each skip lowers the scale" if self.scaled
                 else "no backward took it before the run ended" if ended
                 else "an optimizer step on its gradients writes NaN/Inf into the weights")
        fix = DIVERGED_FIX if diverged else DATA_FIX if data else (
            "lower the learning rate or clip gradients, check the named module and the inputs for "
            "NaN/Inf, add an epsilon inside log/sqrt/division")
        message = (f"{what} at optimizer step {step} ("
                   f"{'made by ' + made_by if made_by else 'backward'} at "
                   f"{short_location(where)}){diverged}{cause}; {after}")
        line = self.node_line
        if self.cause_at is None and line is not None and line.usable and (ended or not made_by):
            line.hold(message, fix, where)  # the loss op's line: at the next backward from here
            return  # (``ended``: placed from the loss's code at once, by ``on_exit``)
        self.report(message, fix=fix, where=self.cause_at or where)

    def _bad_gradients(self, optimizer: Any) -> None:
        """Report gradients that are NaN/Inf before ``optimizer``'s step while the loss was finite;
        the cause: the latest outermost call re-run, naming the first op evaluated where its
        derivative is infinite or undefined (its line is the place), else the backward line."""
        bad = non_finite_grads(optimizer, self.state.models._refs.values())
        if not bad:  # only the sum of the largest magnitudes overflowed
            return
        self.done = True
        self.cause_at = None
        cause = ""
        rerun_ids: set[int] = set()
        for made in stamped_calls(None, self.state)[:1]:
            ref = self.state.models._refs.get(made.model_id)
            model = ref() if ref is not None else None
            args = [r() for r in made.inputs] if made.inputs else None
            if model is not None and args is not None and all(a is not None for a in args) \
                    and not made.kwargs:
                cause = self._op(self._rerun(model, args, None, singular=True))
                rerun_ids = {id(m) for m in model.modules()}
        loss = f" while the loss was {self.latest[1]:.4g}" if self.latest else ""
        where = self.latest[2] if self.latest else None
        cause = cause or self._site(where, rerun_ids)  # the op in the loss's code, if one
        diverged = self._diverged(where) if where is not None else ""
        if diverged:
            self.cause_at = learning_rate_line(self.built)
            if self.cause_at is not None:
                diverged += f" (learning rate set at {short_location(self.cause_at)})"
            self.report(
                f"the gradient of {shown_names(bad)} is NaN or Inf before optimizer step "
                f"{self.state.step + 1}{loss}{diverged}; the step writes NaN into the weights",
                fix=DIVERGED_FIX, where=self.cause_at or where)
            return
        self.report(
            f"the gradient of {shown_names(bad)} is NaN or Inf before optimizer step "
            f"{self.state.step + 1}"
            f"{loss}: an op's derivative is infinite or undefined at the values it saw{cause}; "
            "the step writes NaN into the weights",
            fix="keep the op away from its singular point (sqrt(x + eps), "
                "x / x.norm().clamp_min(eps), acos(x.clamp(-1 + eps, 1 - eps))) or use "
                "F.normalize; torch.autograd.detect_anomaly() names the backward op",
            where=self.cause_at or where)

    def _site(self, where: Any, skip: frozenset[int] | set[int] = frozenset()) -> str:
        """The one unguarded op with a singular derivative in the loss's code (the models but
        ``skip``, and the function holding ``where``), as a clause; its line becomes the place."""
        found = one_singular_site(live_models(self.state.models, skip), where)
        self.cause_at = found[0] if found is not None else self.cause_at
        return found[1] if found is not None else ""

    def _diverged(self, where: Any) -> str:
        return "" if self.scaled else diverged(self.first, self.latest, where)

    def _cause(self, root: Any) -> str:
        """Why the loss ``root`` (a CPU backward root whose graph is intact) is non-finite: the
        outermost calls whose stamped outputs its graph holds are examined from the latest on
        (else the latest outermost training forward), and the first that made a non-finite value
        is named; when none did, what the latest one says (its output was finite). "" when nothing
        is found."""
        first = ""
        for made in stamped_calls(root, self.state)[:_CALLS]:
            said, non_finite = self._explain(made, _UPSTREAM)
            if non_finite:
                return said
            first = first or said
        return first + self._loss_op(root)

    def _loss_op(self, root: Any) -> str:
        """The op of the loss computation (between the models' outputs and the loss) whose saved
        input sits at a singular point (log of 0, a division by 0), as a clause; when that input is
        a model's output, the submodule that made it and the line that called it (the cause)."""
        hit = singular_node(root, stop=is_stamped)
        if hit is None:
            return ""
        node, saved, what = hit
        clamp, lost = lost_margin(node, stop=is_stamped) or (node, "")
        said = f"; in the loss computation, {what} ({type(node).__name__}){lost}"
        self.node_line = NodeLine(root, clamp)  # (the clamp's line, when its margin was lost)
        made = stamp_of(saved) or stamp_by_storage(saved, self.state.stamps)
        ref = self.state.models._refs.get(made.model_id) if made is not None else None
        model = ref() if ref is not None else None
        args = [r() for r in made.inputs] if made is not None and made.inputs else None
        if model is None or args is None or any(a is None for a in args) or made.kwargs:
            return said
        made_at = self._rerun(model, args, None, record=True).made_by(saved)
        if made_at is None:
            return said
        qual, kind, at = made_at
        if at is not None and self.cause_at is None:
            self.cause_at = at
        return (f"{said}: its input is `{qual}` ({kind})'s output, made at {short_location(at)} "
                f"inside {made.module}, which holds exact zeros or values at the op's singular "
                "point")

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
                return said + ("" if earlier is not None else ": the data, not the model"), True
            out = out_ref() if out_ref is not None else None
            if out is not None and out.is_floating_point() and bool(torch.isfinite(out).all()):
                return finite_output(
                    f"{name}'s output at {short_location(fwd_where)} was finite", out), False
        found = self._rerun(model, arg_refs, named)
        if found.module is None and found.op is None:
            # the output itself was freed (a temporary passed on): the re-run's stands for it
            output = found.output
            if isinstance(output, torch.Tensor) and output.is_floating_point() \
                    and bool(torch.isfinite(output).all()):
                return finite_output(
                    f"re-running {name}'s forward from {short_location(fwd_where)} on the same "
                    "batch gives a finite output", output), False
            return "", False
        said = f"; re-running {name}'s forward from {short_location(fwd_where)} on the same batch"
        if found.module is not None:
            module_name, kind, params_bad = found.module
            whose = " whose own parameters are already non-finite" if params_bad else ""
            self.params_bad = self.params_bad or params_bad
            said += (f", the first module whose output is non-finite is `{module_name}` "
                     f"({kind}){whose}")
        return said + self._op(found), True

    def _rerun(self, model: Any, args: list[Any], named: dict | None = None, *,
               singular: bool = False, record: bool = False) -> Any:
        self.state.modules.append(model)  # inner calls of the re-run are not outermost forwards
        try:
            return rerun(model, args, named, singular=singular, record=record)
        finally:
            self.state.modules.pop()

    def _op(self, found: Any) -> str:
        """The re-run's first operation that made a non-finite value (or sits at a singular point
        of its derivative), as a clause; its line becomes the finding's place (the cause)."""
        if found.op is None:
            return ""
        op, at, what = found.op
        zero = zero_guard(at, op, live_models(self.state.models)) if at is not None else None
        self.cause_at = self.cause_at or (zero[0] if zero else at)  # (a 0 epsilon: where set)
        return f"; `{op}` at {short_location(at)} {what}" + (zero[1] if zero else "")
