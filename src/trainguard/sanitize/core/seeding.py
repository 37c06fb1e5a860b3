"""What TG501 and TG502 share: which ``on_repro`` calls seed which generator, which ask for a
reproducible run, and cheap snapshots of the three global generators' states.

A run *asks to be reproducible* when it seeds a global generator with a fixed seed (or restores a
saved state), or turns on ``torch.use_deterministic_algorithms`` / ``cudnn.deterministic``.
``random.seed()``, ``np.random.seed()`` and ``torch.seed()`` without a seed draw one from the
operating system: they do not ask, and leave that generator unseeded.

The three global generators a training script draws from:

- ``torch``: the default CPU generator (weight initialization, ``torch.rand*``, dropout on the CPU,
  DataLoader shuffling and worker seeds). ATen seeds it from the operating system's entropy at
  start-up (``getDefaultCPUGenerator`` calls ``getNonDeterministicRandom()``,
  https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/CPUGeneratorImpl.cpp), so an
  unseeded torch differs run to run. (The CUDA generators start from a fixed default seed.)
- ``numpy``: the legacy global ``RandomState`` behind ``np.random.rand``, ``np.random.shuffle``,
  and libraries called without a ``random_state`` (scikit-learn's splits); seeded from the OS.
- ``random``: Python's module-level ``random.Random`` instance, seeded from the OS.
"""

from __future__ import annotations

import ast
import os
import sys
from typing import Any, Literal

from trainguard.sanitize.core.source import function_node

Family = Literal["torch", "numpy", "random"]
FAMILIES: tuple[Family, ...] = ("torch", "numpy", "random")

SEEDS: dict[str, Family] = {
    "torch.manual_seed": "torch", "torch.seed": "torch", "torch.set_rng_state": "torch",
    "numpy.random.seed": "numpy", "numpy.random.set_state": "numpy",
    "random.seed": "random", "random.setstate": "random",
}
"""Calls that (re)seed or restore one global generator."""

_ENTROPY = {"torch.seed"}  # always a seed from the OS
_SEEDED_WHEN_GIVEN = {"torch.manual_seed", "numpy.random.seed", "random.seed"}  # None: from the OS
_ASK_FLAGS = {"torch.use_deterministic_algorithms", "cudnn.deterministic"}
_CUDA_SEEDS = {"torch.cuda.manual_seed", "torch.cuda.manual_seed_all"}

DESCRIBE: dict[Family, str] = {
    "torch": "torch's default CPU generator (weight init, torch.rand*, dropout, DataLoader "
             "shuffling)",
    "numpy": "numpy's global generator (np.random.*, and libraries called without a "
             "random_state)",
    "random": "Python's random module",
}
HOW: dict[Family, str] = {"torch": "torch.manual_seed(seed)", "numpy": "np.random.seed(seed)",
                          "random": "random.seed(seed)"}


def fixes_seed(name: str, value: Any) -> bool:
    """True when the call ``name(value)`` leaves its generator in a state fixed by the script."""
    if name in _ENTROPY:
        return False
    if name in _SEEDED_WHEN_GIVEN:
        return value is not None
    return name in SEEDS  # a restored state


def asks(name: str, value: Any) -> bool:
    """True when the call ``name(value)`` asks for a reproducible run."""
    if name in SEEDS:
        return fixes_seed(name, value)
    if name in _CUDA_SEEDS:
        return value is not None
    if name in _ASK_FLAGS:
        return bool(value)
    if name == "torch.set_deterministic_debug_mode":
        return value not in (0, "default", None)
    return False


def asks_determinism(name: str, value: Any) -> bool:
    """True when the call ``name(value)`` asks for deterministic kernels (not only a seed)."""
    if name in _ASK_FLAGS:
        return bool(value)
    if name == "torch.set_deterministic_debug_mode":
        return value not in (0, "default", None)
    return False


def call_text(name: str, value: Any) -> str:
    """How the call reads in a message: ``torch.manual_seed(0)``, ``cudnn.deterministic = True``."""
    short = name.replace("numpy.", "np.")
    if name.startswith("cudnn."):
        return f"torch.backends.{name} = {value!r}"
    if name in SEEDS and not name.endswith(("seed", "_seed")):
        return f"{short}(...)"
    shown = repr(value) if value is None or isinstance(value, (int, bool, str)) else "..."
    return f"{short}({shown if value is not None else ''})"


_RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runner.py")


def watched_from_start() -> bool:
    """True when the running script was started by trainguard's runner (``trainguard run``,
    ``trainguard check``) under a watcher that was already installed, so every seeding call of the
    script was seen. A ``trainguard.watch()`` block (or ``fit(guard=True)``) opened by a script
    that is already running may follow seeding calls it never saw."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code  # (runner.py's run_target, known by name: the core imports no runner)
        if code.co_name == "run_target" and code.co_filename == _RUNNER:
            return True
        frame = frame.f_back
    return False


def snapshot(family: Family) -> Any:
    """The generator's current state, cheap to compare (tens of microseconds); None when the
    library is not imported."""
    if family == "random":
        import random

        return random.getstate()
    if family == "numpy":
        np = sys.modules.get("numpy")
        if np is None:
            return None
        _, key, pos, has_gauss, gauss = np.random.get_state()
        return (key.tobytes(), pos, has_gauss, gauss)
    import torch

    return (torch.initial_seed(), bytes(torch.get_rng_state().numpy()))


def reseeded_unseen(family: Family, before: Any, now: Any) -> bool:
    """True when torch's generator was seeded by a path the wrappers do not see (for example
    ``torch.default_generator.manual_seed``): its initial seed changed."""
    return family == "torch" and before is not None and now is not None and before[0] != now[0]


fork_depth = [0]
"""``torch.random.fork_rng`` blocks open now that fork the generators (kept by the repro probe)."""


def in_fork_rng() -> bool:
    """True inside a ``torch.random.fork_rng()`` block that forks the generators: torch's
    generator state seen now is restored when the block ends."""
    return fork_depth[0] > 0


_SEED_ATTRS = ("seed", "manual_seed", "manual_seed_all")


def _seeds_only(body: list[ast.stmt]) -> bool:
    """Every statement of ``body`` seeds or sets a switch: a seeding call, an assignment
    (``os.environ["PYTHONHASHSEED"] = ...``, ``cudnn.deterministic = True``), a docstring, or an
    ``if``/``with`` whose branches hold only such statements (``if cuda: torch.cuda.manual_seed_all
    (seed)``)."""
    for stmt in body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Pass)):
            continue
        if isinstance(stmt, ast.Expr) and (
                isinstance(stmt.value, ast.Constant) or isinstance(stmt.value, ast.Call) and
                isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr in _SEED_ATTRS):
            continue
        if isinstance(stmt, ast.If) and _seeds_only(stmt.body) and _seeds_only(stmt.orelse):
            continue
        if isinstance(stmt, ast.With) and _seeds_only(stmt.body):
            continue
        return False
    return True


def seeding_helper(frame: Any) -> bool:
    """The user function running at ``frame`` only seeds (see ``_seeds_only``): a helper meant to
    reset the run's generators, not code that fixes one draw (a validation set made with a fixed
    seed)."""
    node = function_node(frame.f_code) if frame is not None else None
    body = getattr(node, "body", None)
    return bool(body) and not isinstance(node, ast.Module) and _seeds_only(body)
