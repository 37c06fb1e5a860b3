"""``trainguard.explain``: the autograd state of a tensor, the parameters a loss reaches, a module's modes.

What can be found, and what cannot:

- From a tensor alone: leaf or not, ``requires_grad``, ``grad_fn``, device, dtype, shape, inference
  tensor or not (https://pytorch.org/docs/stable/notes/autograd.html); with ``model=``, which of its
  parameters the backward graph reaches (``AccumulateGrad`` leaves) and which it does not; parameters
  reached only through ``round``/``floor``/``sign``-like ops, whose gradient is zero everywhere.
- *Where* a path was cut leaves no trace in the graph (``detach()`` makes a new leaf), so cut points
  need the forward to be recorded: pass a callable (``explain(lambda: loss_fn(model(x), y),
  model=model)``) or a :func:`~trainguard.explain.record` recording. The recording names the call
  site (file:line, op) of a ``detach``/``.data``, an integer op (``argmax``, ``.long()``,
  comparisons), an op under ``no_grad``/``inference_mode``, or an ``.item()``/``.numpy()`` exit; a
  module that never ran; a module that ran but whose output went nowhere near the loss.
- Not found: a cut through a Python number (``torch.tensor(x.item())``) is reported as a *possible*
  cut (the ``.item()`` site), not a certain one, because autograd and the recording both lose the
  value; cuts made outside the recorded block; a parameter replaced after the forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import torch

from trainguard.catalog import lookup
from trainguard.errors import UsageError
from trainguard.explain import walk
from trainguard.explain.modes import ModuleReport, explain_module
from trainguard.explain.recording import Cut, Recording, record

__all__ = ["explain", "TensorReport", "Unreached"]

Reason = Literal["cut", "possible_cut", "zero_grad", "never_ran", "no_grad_module",
                 "unused_output", "not_recorded"]


@dataclass
class Unreached:
    """A trainable parameter the loss does not reach, and the nearest cut found for it.

    Attributes:
        name: parameter name in ``model.named_parameters()``.
        reason: ``"cut"`` (a recorded cut whose output fed the loss), ``"possible_cut"`` (a
            recorded cut of this parameter's path that could not be followed to the loss, e.g.
            ``.item()``), ``"zero_grad"`` (only reached through round/floor/sign), ``"never_ran"``,
            ``"no_grad_module"`` (its module ran only with grad disabled), ``"unused_output"`` (its
            module ran but its output does not reach the loss), ``"not_recorded"``.
        detail: one sentence for a person.
        cut: the cut site, when one was found.
    """

    name: str
    reason: Reason
    detail: str
    cut: Cut | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reason": self.reason, "detail": self.detail,
                "cut": self.cut.to_dict() if self.cut else None}


@dataclass
class TensorReport:
    """``explain(tensor)``: the tensor's autograd state, and with ``model=`` the parameters it reaches."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    is_leaf: bool
    requires_grad: bool
    grad_fn: str | None
    is_inference: bool
    notes: list[str] = field(default_factory=list)
    cuts: list[Cut] = field(default_factory=list)  # recorded cuts whose outputs fed this tensor
    reached: list[str] | None = None
    unreached: list[Unreached] | None = None
    frozen: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape), "dtype": self.dtype, "device": self.device,
            "is_leaf": self.is_leaf, "requires_grad": self.requires_grad, "grad_fn": self.grad_fn,
            "is_inference": self.is_inference, "notes": list(self.notes),
            "cuts": [c.to_dict() for c in self.cuts], "reached": self.reached,
            "unreached": None if self.unreached is None else [u.to_dict() for u in self.unreached],
            "frozen": self.frozen,
        }

    def __str__(self) -> str:
        kind = "leaf" if self.is_leaf else "non-leaf"
        lines = [f"tensor {tuple(self.shape)} {self.dtype} on {self.device}: {kind}, "
                 f"requires_grad={self.requires_grad}, grad_fn={self.grad_fn or 'None'}"
                 + (", inference tensor" if self.is_inference else "")]
        lines += [f"  {note}" for note in self.notes]
        for cut in self.cuts:
            lines.append(f"  cut upstream: {cut.describe()}")
        if self.reached is not None:
            lines.append(f"  reaches {len(self.reached)} trainable parameter tensors"
                         + (f": {', '.join(self.reached)}" if len(self.reached) <= 12 else ""))
        if self.unreached:
            lines.append(f"  does NOT reach {len(self.unreached)} (they get no gradient):")
            by_detail: dict[str, list[str]] = {}
            for u in self.unreached:
                by_detail.setdefault(u.detail, []).append(u.name)
            lines += [f"    {', '.join(names)}: {detail}" for detail, names in by_detail.items()]
            entry = lookup("TG205")
            lines.append(f"  see {entry.code} {entry.name} ({entry.docs}) for the usual causes")
        if self.frozen:
            lines.append(f"  frozen (requires_grad=False, not expected to be reached): "
                         f"{', '.join(self.frozen)}")
        return "\n".join(lines)


def explain(
    value: torch.Tensor | torch.nn.Module | Callable[[], Any],
    *,
    model: torch.nn.Module | None = None,
    recording: Recording | None = None,
) -> TensorReport | ModuleReport:
    """Explain a tensor's autograd state, which parameters a loss reaches, or a module's modes.

    Args:
        value: a tensor (e.g. a loss, shape ``()``), a module, or a callable taking no arguments
            that runs the forward and returns the tensor (it is run once under
            :func:`~trainguard.explain.record`, which lets cut points be found).
        model: with a tensor, report which of ``model``'s trainable parameters the tensor's
            backward graph reaches and, for those it does not, the nearest cut found.
        recording: a :class:`~trainguard.explain.record` recording of the forward that produced
            ``value``; needed to locate cut points when ``value`` is already a tensor.

    Returns:
        :class:`TensorReport` or :class:`~trainguard.explain.modes.ModuleReport`; ``print`` it for a
        terminal, ``.to_dict()`` for programs.

    Raises:
        UsageError: ``value`` is none of the above, or a callable that did not return a tensor.

    Example::

        report = trainguard.explain(lambda: F.cross_entropy(model(x), y), model=model)
        print(report)                # which parameters get no gradient, and where the path was cut
        trainguard.explain(model)    # train/eval flags of Dropout/BatchNorm, frozen parameter counts
    """
    if isinstance(value, torch.nn.Module):
        return explain_module(value)
    if not isinstance(value, torch.Tensor) and callable(value):
        with record(model) as rec:
            value = value()
        if not isinstance(value, torch.Tensor):
            raise UsageError(f"explain(fn): fn() returned {type(value).__name__}, not a tensor; "
                             "return the loss tensor, e.g. lambda: loss_fn(model(x), y)")
        recording = rec
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"explain() takes a tensor, a module or a callable returning a tensor; "
                         f"got {type(value).__name__}")
    return _explain_tensor(value, model, recording)


def _explain_tensor(t: torch.Tensor, model: torch.nn.Module | None,
                    rec: Recording | None) -> TensorReport:
    report = TensorReport(
        shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""), device=str(t.device),
        is_leaf=t.is_leaf, requires_grad=t.requires_grad,
        grad_fn=type(t.grad_fn).__name__ if t.grad_fn is not None else None,
        is_inference=t.is_inference(),
        cuts=rec.cuts_behind(t) if rec is not None else [],
    )
    report.notes = _notes(t, report)
    if model is not None:
        _reach(t, model, rec, report)
    return report


def _notes(t: torch.Tensor, report: TensorReport) -> list[str]:
    notes = []
    if t.is_inference():
        notes.append("created under torch.inference_mode(): it can never require grad; build it "
                     "outside inference_mode to backpropagate")
    elif not (t.is_floating_point() or t.is_complex()):
        notes.append(f"{report.dtype} tensors cannot require grad (only floating point and "
                     "complex can); the op that made it (argmax, long(), comparison) cut the path")
    elif t.grad_fn is None and not t.requires_grad:
        notes.append("no grad_fn and requires_grad=False: backward() on it raises; it was built "
                     "under no_grad, from detached or integer tensors, or from frozen parameters")
    elif t.is_leaf and t.requires_grad:
        notes.append("a leaf that requires grad: backward() accumulates into its .grad")
    elif t.grad_fn is not None and t.numel() != 1:
        notes.append(f"not a scalar ({t.numel()} elements): backward() needs gradient= or a "
                     "reduction such as .sum()/.mean() first")
    return notes


def _reach(t: torch.Tensor, model: torch.nn.Module, rec: Recording | None,
           report: TensorReport) -> None:
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    report.frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    root = t.grad_fn
    reached = walk.leaves_behind(t, stop_at=walk.ZERO_GRAD_NODES) if t.requires_grad else set()
    report.reached = [n for n, p in params if id(p) in reached]
    zero_nodes = {} if root is None else {
        id(n): n for n in walk.iter_nodes(root, stop_at=walk.ZERO_GRAD_NODES)
        if type(n).__name__ in walk.ZERO_GRAD_NODES}
    owners = {id(p): m for m in model.modules() for p in m.parameters(recurse=False)}
    names = {id(m): n for n, m in model.named_modules()}
    behind_zero = {op: walk.leaves_behind(node) for op, node in
                   ((type(n).__name__, n) for n in zero_nodes.values())}
    behind_cut = {} if rec is None else {
        c.site: set().union(*(walk.leaves_behind(i) for i in c.inputs)) for c in rec.cuts}
    report.unreached = [
        _why_unreached(name, p, owners.get(id(p)), names, behind_zero, behind_cut, t, rec)
        for name, p in params if id(p) not in reached
    ]


def _why_unreached(name: str, p: torch.Tensor, owner: torch.nn.Module | None,
                   names: dict[int, str], behind_zero: dict[str, set[int]],
                   behind_cut: dict[int, set[int]], t: torch.Tensor,
                   rec: Recording | None) -> Unreached:
    for op, leaves in behind_zero.items():
        if id(p) in leaves:
            return Unreached(name, "zero_grad", f"reached only through {op}, whose gradient is "
                             "zero everywhere (a straight-through estimator keeps it: "
                             "x + (x.round() - x).detach())")
    if rec is None:
        return Unreached(name, "not_recorded", "cut point unknown: pass the forward as a callable, "
                         "explain(lambda: loss_fn(model(x), y), model=model), to locate it")
    fed = {c.site for c in rec.cuts_behind(t)}
    behind = [c for c in rec.cuts if id(p) in behind_cut[c.site]]
    certain = [c for c in behind if c.site in fed]
    mod = f"`{names.get(id(owner), '?')}`" if owner is not None else "its module"
    if certain:
        cut = certain[0]  # the earliest site on a path from this parameter to the loss
        return Unreached(name, "cut", cut.describe(), cut)
    ran = rec.module_ran(owner) if owner is not None else None
    if owner is not None and ran is None:
        return Unreached(name, "never_ran", f"module {mod} never ran in the recorded forward")
    if ran is False:
        cut = next((c for c in behind if c.kind in ("no_grad", "inference_mode")), None)
        where = f" ({cut.describe()})" if cut else ""
        return Unreached(name, "no_grad_module", f"module {mod} ran only with grad disabled"
                         f"{where}", cut)
    if behind:
        # Tensor-to-tensor cuts are followed reliably, so one that did not feed the loss most
        # likely did not cut this path; a Python-number exit (.item()) cannot be followed.
        escapes = [c for c in behind if c.kind == "escape"]
        cut = (escapes or behind)[-1]
        return Unreached(name, "possible_cut", f"probably {cut.describe()} (its value could not "
                         "be followed to the loss)", cut)
    return Unreached(name, "unused_output", f"module {mod} ran but its output does not reach "
                     "this tensor (an unused branch or head)")


# `trainguard.explain.record(model)` works whether `trainguard.explain` resolves to this function
# (the public name) or to the package (after `import trainguard.explain.<submodule>`).
explain.record = record  # type: ignore[attr-defined]
