"""TG503 rng-copied-to-workers: an RNG built in ``Dataset.__init__`` is copied into every worker.

DataLoader workers are forked copies of the dataset; an ``np.random.default_rng()``,
``RandomState``, ``random.Random`` or ``torch.Generator`` stored on the dataset is copied with
the same state into every worker, so all workers draw the same numbers
(https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading). Fires when
the RNG is used outside ``__init__`` and a DataLoader in the file has workers
(``num_workers`` not 0) and no ``worker_init_fn``, or one that only reseeds the global RNGs
(``np.random.seed(...)``, ``random.seed(...)``) and never reaches the worker's dataset.

The same holds for an RNG that a transform handed to the dataset owns (a MONAI-style
``Randomizable`` with its own ``RandomState``), created by a helper that ``__init__`` calls or
a class attribute, in this file or another file of the project (:mod:`worker_rngs`), and for
an RNG handed to an object the dataset keeps (``self.transform = Flip(self.random_state)``).
When the file has a ``worker_init_fn`` that reseeds the worker's dataset and never hands it to a
DataLoader, the finding is at the DataLoader that lacks it; when the DataLoader's
``worker_init_fn`` is a stub that does nothing (``pass``), the finding is at that stub.
The loader's settings may come from a config the file fixes (``DataLoader(ds,
**cfg["loader"])``); settings it cannot resolve stay silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import const_value, dotted, kwarg, parent
from trainguard.lint.consts import resolve
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script
from trainguard.lint.worker_rngs import held_rngs, rng_ctor

CODE = "TG503"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not _workers_without_init(script):
        return
    idle = _idle_worker_init(script)
    hits = list(_copied_rngs(script, idle is None))
    if hits and idle is not None:
        # the loader is handed a worker_init_fn that does nothing: that function is the fault
        name = f"{idle.name}()" if isinstance(idle, ast.FunctionDef) else "the lambda"
        for hit in hits:
            yield Hit(idle, f"{name}, the DataLoader's worker_init_fn, reseeds nothing, so the "
                            f"workers keep the copied RNG state: {hit.message}",
                      fix="reseed the worker's copy of the dataset's RNG in the worker_init_fn "
                          "(get_worker_info().dataset, from get_worker_info().seed)")
        return
    unused = _unused_worker_init(script) if hits else None
    if unused is None:
        yield from hits
        return
    # the file has the reseeding function: the DataLoader that is not handed it is the fault
    for loader in (c for c in script.calls if _loader_with_workers(script, c)):
        yield Hit(loader, f"this DataLoader's workers each get a copy of the dataset with the "
                          f"same RNG state, and {unused.name}() (at "
                          f"{script.at(unused.lineno)}), which reseeds the worker's copy of the "
                          f"dataset, is never passed to it: every worker draws the same numbers",
                  fix=f"pass worker_init_fn={unused.name} to the DataLoader")


def _unused_worker_init(script: Script) -> ast.FunctionDef | None:
    """A function of the file, not a method, that reaches the worker's copy of the dataset
    (``get_worker_info().dataset``, as a ``worker_init_fn`` does) and that nothing in the file
    names: written to reseed the workers, never handed to a DataLoader."""
    loaded = {n.id for n in script.nodes if isinstance(n, ast.Name) and
              isinstance(n.ctx, ast.Load)} | {n.attr for n in script.nodes
                                                if isinstance(n, ast.Attribute)}
    for name, funcs in script.functions.items():
        if name in loaded or len(funcs) != 1 or not isinstance(funcs[0], ast.FunctionDef) or \
                script.enclosing_class(funcs[0]) is not None:
            continue
        body = list(ast.walk(funcs[0]))
        if any(isinstance(n, ast.Call) and (script.call_qualname(n) or "").endswith(
                "get_worker_info") for n in body) and \
                any(isinstance(n, ast.Attribute) and n.attr == "dataset" for n in body):
            return funcs[0]
    return None


def _idle_worker_init(script: Script) -> ast.FunctionDef | ast.Lambda | None:
    """The ``worker_init_fn`` of a DataLoader with workers, when it is a function of the file (or
    a lambda) that does nothing at all: no call, no store into an object (``def worker_init(
    worker_id): pass``). It was written to reseed the workers and never does."""
    for call in script.calls:
        init = kwarg(call, "worker_init_fn") if _loader_with_workers(script, call) else None
        if isinstance(init, ast.Call) and init.args and \
                script.call_qualname(init) == "functools.partial":
            init = init.args[0]
        if isinstance(init, ast.Name) and len(script.functions.get(init.id, [])) == 1:
            init = script.functions[init.id][0]
        if isinstance(init, (ast.FunctionDef, ast.Lambda)) and not any(
                isinstance(n, (ast.Call, ast.Global, ast.Nonlocal)) or
                isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Store)
                for n in ast.walk(init)):
            return init
    return None


def _copied_rngs(script: Script, reseeds: bool = True) -> Iterator[Hit]:
    globals_only = "" if not reseeds or all(kwarg(c, "worker_init_fn") is None for c in script.calls
                             if _loader_with_workers(script, c)) else \
        " (its worker_init_fn reseeds only the global RNGs, not this one)"
    foreign: list[str] = []
    for held in held_rngs(script):
        cls = held.cls.node
        kind = (held.script.call_qualname(rng_ctor(held.created)) or "RNG").rsplit(".", 1)[-1]
        if held.setter is not None:
            setter = held.setter.func.attr  # type: ignore[attr-defined]
            yield Hit(held.setter, f"{setter}() makes a {kind} for {cls.name}.{held.attr} here, "
                                   f"before the DataLoader's workers start, and {cls.name} "
                                   f"draws from it for each item: every worker gets a copy with "
                                   f"the same state and draws the same random numbers"
                                   f"{globals_only}")
            continue
        if held.script is not script:
            if f"{cls.name}.{held.attr}" not in foreign:
                foreign.append(f"{cls.name}.{held.attr}")
            continue
        func = script.enclosing_function(held.created)
        if func is not None and func.name == "__init__" and _is_dataset(cls) and \
                _reseeded(cls, func, held.attr):
            continue
        where = f"{cls.name}.{func.name}" if func is not None else cls.name
        stored = parent(held.created)
        how = f"stores a {kind} in self.{held.attr}" if isinstance(stored, ast.Assign) and \
            any(dotted(t) == f"self.{held.attr}" for t in stored.targets) else \
            f"hands a {kind} made here to self.{held.attr}, an object"
        yield Hit(held.created, f"{where} {how} that {cls.name} draws from for each item: "
                                f"every DataLoader worker gets a copy with the same state and "
                                f"draws the same random numbers{globals_only}")
    if foreign:
        loader = next(c for c in script.calls if _loader_with_workers(script, c))
        yield Hit(loader, f"this DataLoader's workers each get a copy of the dataset with the "
                          f"same RNG state in {', '.join(foreign)} (created before the workers "
                          f"start, used for each item): every worker draws the same numbers",
                  fix="reseed those RNGs per worker in a worker_init_fn (from "
                      "get_worker_info().seed), or draw from torch's RNG, which DataLoader "
                      "seeds per worker")


def _is_dataset(cls: ast.ClassDef) -> bool:
    return any((dotted(b) or "").endswith("Dataset") for b in cls.bases)


def _workers_without_init(script: Script) -> bool:
    return any(_loader_with_workers(script, call) for call in script.calls)


def _loader_with_workers(script: Script, call: ast.Call) -> bool:
    """A DataLoader with workers and no ``worker_init_fn``; its keywords may come from a
    config (``DataLoader(ds, **cfg["loader"])``) that the file fixes: unknown stays silent."""
    if (script.call_qualname(call) or "").endswith("DataLoader"):
        workers = kwarg(call, "num_workers")
        if workers is not None:
            return const_value(workers) != 0 and _no_dataset_reseed(
                script, kwarg(call, "worker_init_fn"))
        for k in call.keywords:
            if k.arg is None:  # **settings
                settings = resolve(script, k.value)
                if isinstance(settings, dict) and "num_workers" in settings:
                    n = settings["num_workers"]
                    return n != 0 and "worker_init_fn" not in settings and \
                        kwarg(call, "worker_init_fn") is None
    return False


_RESEED = {"manual_seed", "seed", "setstate", "set_state"}
_GLOBAL_RNG_MODULES = ("numpy.random.", "random.", "torch.")
_BUILTINS = {"int", "float", "str", "hash", "abs", "len", "print", "min", "max", "divmod"}


def _no_dataset_reseed(script: Script, init: ast.expr | None) -> bool:
    """No ``worker_init_fn``, or one of this file that only reseeds the global RNGs
    (``np.random.seed(torch.initial_seed() % 2**32)``, as the reproducibility notes suggest:
    https://pytorch.org/docs/stable/notes/randomness.html#dataloader): it never reaches the
    worker's copy of the dataset (``get_worker_info().dataset``), so RNG objects the dataset
    holds keep the copied state. One that calls anything else, or is not in the file, may
    reseed them and counts as a reseed. ``functools.partial(fn, ...)`` is read as ``fn``."""
    if init is None:
        return True
    if isinstance(init, ast.Call) and init.args and \
            script.call_qualname(init) == "functools.partial":
        init = init.args[0]  # partial(seed_worker, seed=seed): the function it calls
    if isinstance(init, ast.Lambda):
        body: ast.AST = init.body
    elif isinstance(init, ast.Name) and len(script.functions.get(init.id, [])) == 1:
        body = script.functions[init.id][0]
    else:
        return False
    for sub in ast.walk(body):
        if isinstance(sub, ast.Attribute) and sub.attr == "dataset":
            return False
        if isinstance(sub, (ast.Global, ast.Nonlocal)):
            return False
        if isinstance(sub, ast.Call):
            q = script.call_qualname(sub) or ""
            name = sub.func.id if isinstance(sub.func, ast.Name) else None
            if name in _BUILTINS and name not in script.functions:
                continue
            if "()" in q or not q.startswith(_GLOBAL_RNG_MODULES) or \
                    q.endswith("get_worker_info"):
                return False
    return True


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
