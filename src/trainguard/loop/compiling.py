"""``fit(compile=True)``: the model's forward through ``torch.compile``, with a fallback.

``torch.compile`` compiles lazily, at the first call with new input shapes or modes, so a failure
(no C++ compiler for the inductor backend, an unsupported Python version, an operator the backend
cannot lower) shows at a forward call. :class:`CompiledForward` then runs that call and every later
one eagerly, with one :class:`CompileFallbackWarning` naming the cause. AOTAutograd normally
compiles the backward graph at the first ``backward()``; ``force_non_lazy_backward_lowering`` makes
it compile with the forward, so that its failures are caught there too, before any gradient
exists (https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html).

Checkpoints never see the wrapper: they hold the plain module's ``state_dict`` (no ``_orig_mod.``
prefix), so a compiled run resumes into an uncompiled one and back.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator, Mapping

import torch
from torch import nn

from trainguard.errors import UsageError

__all__ = ["CompiledForward", "CompileFallbackWarning", "compile_options", "compile_context"]


class CompileFallbackWarning(UserWarning):
    """``torch.compile`` failed; the run goes on without it."""


class _Fallback:
    """Shared by the training and validation forwards of one run: one warning, one decision."""

    def __init__(self) -> None:
        self.cause: str | None = None


class CompiledForward:
    """Calls ``torch.compile(module, **options)``; on a compile failure, ``module`` itself.

    Args:
        module: the module to run (a ``DistributedDataParallel`` for training under torchrun).
        options: keyword arguments of ``torch.compile`` (``mode``, ``backend``, ``dynamic``, ...).
        fallback: shared with the run's other compiled forwards.
    """

    def __init__(self, module: nn.Module, options: Mapping[str, Any],
                 fallback: _Fallback | None = None) -> None:
        self.module = module
        self.fallback = fallback or _Fallback()
        self.compiled: Any = None
        try:
            self.compiled = torch.compile(module, **options)
        except Exception as exc:  # e.g. "Dynamo is not supported on Python 3.x"
            self._give_up(exc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fallback.cause is not None:
            return self.module(*args, **kwargs)
        try:
            return self.compiled(*args, **kwargs)
        except Exception as exc:
            if not is_compile_error(exc):
                raise
            out = self.module(*args, **kwargs)  # an error of the model itself raises here
            self._give_up(exc)
            return out

    def _give_up(self, exc: BaseException) -> None:
        if self.fallback.cause is not None:
            return
        self.fallback.cause = describe(exc)
        warnings.warn(f"torch.compile failed, so the run goes on without it ({self.fallback.cause})"
                      "; fit(compile=False) / no --compile skips compiling",
                      CompileFallbackWarning, stacklevel=3)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()


def describe(exc: BaseException) -> str:
    """The failure in one line: the exception and, when it wraps one (a backend's error inside
    ``BackendCompilerFailed``), the innermost cause."""
    root = exc
    while True:
        inner = getattr(root, "inner_exception", None) or root.__cause__
        if inner is None or inner is root:
            break
        root = inner
    text = _first_line(exc)
    if root is not exc:
        text += f" ... caused by {_first_line(root)}"
    return text[:500]


def is_compile_error(exc: BaseException) -> bool:
    """An exception raised by TorchDynamo, AOTAutograd or a compiler backend (inductor)."""
    dynamo_exc = getattr(getattr(torch, "_dynamo", None), "exc", None)
    base = getattr(dynamo_exc, "TorchDynamoException", None)
    if base is not None and isinstance(exc, base):
        return True
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor", "torch._functorch"))


def compile_options(compile: bool | Mapping[str, Any]) -> dict[str, Any] | None:
    """``None`` for no compile, else the keyword arguments for ``torch.compile``.

    Raises:
        UsageError: neither a bool nor a mapping.
    """
    if compile is False or compile is None:
        return None
    if compile is True:
        return {}
    if isinstance(compile, Mapping):
        return dict(compile)
    raise UsageError(f"fit(compile=...) must be True, False or a dict of torch.compile "
                     f"arguments, got {compile!r}")


@contextlib.contextmanager
def compile_context(enabled: bool) -> Iterator[None]:
    """While the run lasts, AOTAutograd compiles backward graphs with their forward."""
    config = getattr(getattr(torch, "_functorch", None), "config", None)
    if not enabled or not hasattr(config, "force_non_lazy_backward_lowering"):
        yield
        return
    with config.patch(force_non_lazy_backward_lowering=True):
        yield
