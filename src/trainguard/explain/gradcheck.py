"""``trainguard.gradcheck``: ``torch.autograd.gradcheck`` that says *where* gradients disagree.

``torch.autograd.gradcheck`` compares the analytical Jacobian (from backward) with finite
differences and should run in double precision: "the check between numerical and analytical has
lower success rate if the input is not double precision"
(https://pytorch.org/docs/stable/generated/torch.autograd.gradcheck.gradcheck.html). Its answer is a
bool or an exception with the whole Jacobians printed. This wrapper casts floating inputs to float64,
runs PyTorch's check (the verdict), and when it fails computes both Jacobians itself to name the
input, the elements and the size of each disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.autograd.gradcheck import GradcheckError

from trainguard.errors import UsageError

__all__ = ["gradcheck", "GradcheckReport", "InputMismatch"]


@dataclass
class InputMismatch:
    """Disagreements for one input.

    Attributes:
        index: position of the input in ``inputs``.
        shape: the input's shape.
        count: Jacobian entries outside ``atol + rtol * |numerical|``.
        worst_output: flat index of the output element of the worst entry.
        worst_input: index (a tuple, one per dimension) of the input element of the worst entry.
        analytical / numerical: the two derivatives there; ``abs_diff`` their distance.
        elements: every disagreeing input element (tuples), at most 20.
    """

    index: int
    shape: tuple[int, ...]
    count: int
    worst_output: int
    worst_input: tuple[int, ...]
    analytical: float
    numerical: float
    abs_diff: float
    elements: list[tuple[int, ...]] = field(default_factory=list)

    def __str__(self) -> str:
        entries = "1 Jacobian entry disagrees" if self.count == 1 else \
            f"{self.count} Jacobian entries disagree"
        return (f"input {self.index} {self.shape}: {entries}; worst at "
                f"input element {self.worst_input}, output element {self.worst_output}: "
                f"analytical {self.analytical:.6g} vs numerical {self.numerical:.6g} "
                f"(off by {self.abs_diff:.3g}); elements: {self.elements}")


@dataclass
class GradcheckReport:
    """The result of :func:`gradcheck`; true when every check passed."""

    ok: bool
    message: str = ""
    crashed: bool = False  # fn or its backward raised, so nothing was compared
    mismatches: list[InputMismatch] = field(default_factory=list)
    gradgrad_ok: bool | None = None
    gradgrad_message: str = ""

    def __bool__(self) -> bool:
        return self.ok and self.gradgrad_ok is not False

    def to_dict(self) -> dict[str, Any]:
        return {"ok": bool(self), "first_order_ok": self.ok, "crashed": self.crashed,
                "message": self.message,
                "mismatches": [m.__dict__ | {"shape": list(m.shape),
                                             "worst_input": list(m.worst_input),
                                             "elements": [list(e) for e in m.elements]}
                               for m in self.mismatches],
                "gradgrad_ok": self.gradgrad_ok, "gradgrad_message": self.gradgrad_message}

    def __str__(self) -> str:
        if self.crashed:
            lines = [f"gradcheck: could not run fn in float64: {self.message}"]
        else:
            lines = ["gradcheck: gradients match (float64)" if self.ok else
                     "gradcheck: FAILED, the backward does not match finite differences (float64)"]
        lines += [f"  {m}" for m in self.mismatches]
        if not self.ok and not self.mismatches and not self.crashed:
            lines.append(f"  {self.message.splitlines()[0] if self.message else ''}")
        if self.gradgrad_ok is not None:
            lines.append("gradgradcheck: second derivatives match" if self.gradgrad_ok else
                         f"gradgradcheck: FAILED: {self.gradgrad_message.splitlines()[0]}")
        return "\n".join(lines)


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    check_grad_grad: bool = False,
) -> GradcheckReport:
    """Check ``fn``'s backward against finite differences, in float64, and say where it is wrong.

    Args:
        fn: a function of tensors returning a tensor or a tuple of tensors, e.g.
            ``MyFunction.apply`` of a custom :class:`torch.autograd.Function`, or a loss.
        *inputs: its arguments. Floating tensors are copied to float64; those with
            ``requires_grad=True`` are checked (all floating ones if none requires grad). Other
            arguments pass through unchanged. Tensors ``fn`` holds itself (a module's weights)
            are not cast: call ``model.double()`` first, or PyTorch reports a dtype mismatch.
        eps: finite-difference step (default 1e-6, as torch's).
        atol, rtol: an entry disagrees when ``|analytical - numerical| > atol + rtol * |numerical|``
            (torch's defaults).
        check_grad_grad: also run ``torch.autograd.gradgradcheck`` (second derivatives).

    Returns:
        A :class:`GradcheckReport`, truthy when all checks passed; ``print`` it to see which input
        and which elements disagree and by how much.

    Raises:
        UsageError: no floating-point tensor among ``inputs``.

    Example::

        report = trainguard.gradcheck(MySquare.apply, torch.randn(3, 4))
        assert report, report
    """
    args, checked = _as_float64(inputs)
    message, crashed = "", False
    try:
        ok = torch.autograd.gradcheck(fn, args, eps=eps, atol=atol, rtol=rtol, raise_exception=True)
    except GradcheckError as exc:
        ok, message = False, f"GradcheckError: {exc}"
    except Exception as exc:  # fn itself (or its backward) raised
        ok, message, crashed = False, f"{type(exc).__name__}: {exc}", True
        if "dtype" in str(exc):
            message += (" (inputs were cast to float64; tensors fn holds itself, such as a "
                        "module's weights, were not: call model.double() first)")
    report = GradcheckReport(ok=bool(ok), message=message, crashed=crashed)
    if not report.ok and not crashed:
        report.mismatches = _locate(fn, args, checked, eps=eps, atol=atol, rtol=rtol)
    if check_grad_grad:
        try:
            report.gradgrad_ok = bool(torch.autograd.gradgradcheck(
                fn, args, eps=eps, atol=atol, rtol=rtol, raise_exception=True))
        except Exception as exc:
            report.gradgrad_ok, report.gradgrad_message = False, f"{type(exc).__name__}: {exc}"
    return report


def _as_float64(inputs: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[int]]:
    floating = [i for i, v in enumerate(inputs)
                if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())]
    if not floating:
        raise UsageError("gradcheck(fn, *inputs): no floating-point tensor among the inputs; pass "
                         "at least one, e.g. torch.randn(3, requires_grad=True)")
    checked = [i for i in floating if inputs[i].requires_grad] or floating
    args = []
    for i, value in enumerate(inputs):
        if i in floating:
            dtype = torch.complex128 if value.is_complex() else torch.float64
            value = value.detach().to(dtype).clone().requires_grad_(i in checked)
        args.append(value)
    return tuple(args), checked


def _outputs(fn: Callable[..., Any], args: tuple[Any, ...]) -> torch.Tensor:
    out = fn(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return torch.cat([o.reshape(-1) for o in outs
                      if isinstance(o, torch.Tensor) and o.is_floating_point()])


def _locate(fn: Callable[..., Any], args: tuple[Any, ...], checked: list[int], *,
            eps: float, atol: float, rtol: float) -> list[InputMismatch]:
    """Both Jacobians per checked input; the entries that disagree."""
    found = []
    try:
        out = _outputs(fn, args)
    except Exception:
        return found
    for index in checked:
        x = args[index]
        if x.is_complex():
            continue  # located only for real inputs; torch's message covers complex ones
        analytical = torch.zeros(out.numel(), x.numel(), dtype=torch.float64)
        live = _outputs(fn, args)
        for row in range(out.numel()):
            if not live.requires_grad:
                break
            grads = torch.autograd.grad(live[row], x, retain_graph=True, allow_unused=True)
            if grads[0] is not None:
                analytical[row] = grads[0].reshape(-1).to(torch.float64)
        numerical = torch.zeros_like(analytical)
        flat = x.detach().reshape(-1)
        with torch.no_grad():
            for col in range(x.numel()):
                saved = flat[col].item()
                flat[col] = saved + eps
                plus = _outputs(fn, args)
                flat[col] = saved - eps
                minus = _outputs(fn, args)
                flat[col] = saved
                numerical[:, col] = (plus - minus) / (2 * eps)
        diff = (analytical - numerical).abs()
        bad = diff > atol + rtol * numerical.abs()
        if not bad.any():
            continue
        row, col = divmod(int(torch.where(bad, diff, torch.zeros_like(diff)).argmax()), x.numel())
        cols = sorted({int(c) for c in bad.nonzero()[:, 1]})
        found.append(InputMismatch(
            index=index, shape=tuple(x.shape), count=int(bad.sum()), worst_output=row,
            worst_input=_unravel(col, x.shape), analytical=float(analytical[row, col]),
            numerical=float(numerical[row, col]), abs_diff=float(diff[row, col]),
            elements=[_unravel(c, x.shape) for c in cols[:20]]))
    return found


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))
