"""TG503 rng-copied-to-workers: an RNG built in ``Dataset.__init__`` is copied into every worker.

DataLoader workers are forked copies of the dataset; an ``np.random.default_rng()``,
``RandomState``, ``random.Random`` or ``torch.Generator`` stored on the dataset is copied with
the same state into every worker, so all workers draw the same numbers
(https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading). Fires when
the RNG is used outside ``__init__`` and a DataLoader in the file has workers
(``num_workers`` not 0) and no ``worker_init_fn``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import const_value, dotted, kwarg
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG503"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_RNG = ("numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
        "random.Random", "torch.Generator")


def check(script: Script) -> Iterator[Hit]:
    if not _workers_without_init(script):
        return
    for cls in script.classes.values():
        if not any((dotted(b) or "").endswith("Dataset") for b in cls.bases):
            continue
        init = next((b for b in cls.body if isinstance(b, ast.FunctionDef)
                     and b.name == "__init__"), None)
        if init is None:
            continue
        for node in ast.walk(init):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            q = script.call_qualname(node.value) or ""
            if not q.endswith(_RNG):
                continue
            for t in node.targets:
                attr = dotted(t) or ""
                if attr.startswith("self.") and _used_elsewhere(cls, init, attr[5:]) and \
                        not _reseeded(cls, init, attr[5:]):
                    yield Hit(node.value,
                              f"{cls.name}.__init__ stores a {q.rsplit('.', 1)[-1]} in {attr}: "
                              f"every DataLoader worker gets a copy with the same state and "
                              f"draws the same random numbers")


def _workers_without_init(script: Script) -> bool:
    for call in script.calls:
        if (script.call_qualname(call) or "").endswith("DataLoader"):
            workers = kwarg(call, "num_workers")
            if workers is not None and const_value(workers) != 0 and \
                    kwarg(call, "worker_init_fn") is None:
                return True
    return False


_RESEED = {"manual_seed", "seed", "setstate", "set_state"}


def _reseeded(cls: ast.ClassDef, init: ast.AST, attr: str) -> bool:
    """A method other than ``__init__`` reseeds or replaces the RNG (``self.g.manual_seed(i)``,
    ``self.rs.seed(...)``, ``self.rng.bit_generator.state = ...``, ``self.rng = ...``): its
    draws then depend on what that method sets, not on the copied state."""
    for method in cls.body:
        if method is init or not isinstance(method, ast.FunctionDef):
            continue
        for sub in ast.walk(method):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in _RESEED and dotted(sub.func.value) == f"self.{attr}":
                return True
            if isinstance(sub, ast.Assign) and any(
                    (dotted(t) or "").startswith(f"self.{attr}") for t in sub.targets):
                return True
    return False


def _used_elsewhere(cls: ast.ClassDef, init: ast.AST, attr: str) -> bool:
    for method in cls.body:
        if method is init or not isinstance(method, ast.FunctionDef):
            continue
        for sub in ast.walk(method):
            if isinstance(sub, ast.Attribute) and sub.attr == attr and \
                    isinstance(sub.value, ast.Name) and sub.value.id == "self":
                return True
    return False
