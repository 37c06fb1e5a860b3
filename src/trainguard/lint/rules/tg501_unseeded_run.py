"""TG501 unseeded-run: a script that seeds some random generators uses others unseeded.

A run is reproducible only if every generator it draws from is seeded
(https://pytorch.org/docs/stable/notes/randomness.html): ``torch`` (weight init, ``randn``,
shuffling DataLoaders, dropout), ``numpy.random`` and Python's ``random``. Fires only when the
script asks to be reproducible (it seeds at least one generator or sets deterministic flags), and
only for generators it actually uses. ``seed_everything``/``set_seed`` helpers count as seeding
all three.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, is_true, kwarg
from trainguard.lint.consts import const_eval
from trainguard.lint.repro import Repro
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG501"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_TORCH_RNG = re.compile(r"^torch\.(rand|randn|randint|randperm|normal|bernoulli|multinomial|"
                        r"rand_like|randn_like|randint_like|utils\.data\.random_split)$")
_NUMPY_OK = {"seed", "default_rng", "RandomState", "Generator", "SeedSequence", "get_state",
             "set_state", "PCG64", "MT19937"}
_RANDOM_USE = {"random", "randint", "randrange", "choice", "choices", "shuffle", "sample",
               "uniform", "gauss", "normalvariate", "betavariate"}


def check(script: Script) -> Iterator[Hit]:
    repro = Repro(script)
    if not repro.seeded:
        return  # a script that seeds nothing has not asked for reproducible runs
    first: dict[str, ast.AST] = {}
    seeded_workers = _workers_seed_numpy(script)
    for call in sorted(script.calls, key=lambda c: (c.lineno, c.col_offset)):
        family = _family(script, call)
        if family in ("numpy", "random") and seeded_workers and _in_dataset(script, call):
            continue  # drawn in DataLoader workers, which seed numpy and random per worker
        if family and family not in repro.seeded and family not in first:
            first[family] = call
    seeded = ", ".join(sorted(repro.seeded)) or "nothing"
    for family, node in first.items():
        yield Hit(node, f"the script seeds {seeded} but draws from {family}'s random generator "
                        f"here unseeded: runs differ even with the same seed",
                  fix=f"seed {family} too ({_HOW[family]}), or call "
                      f"trainguard.seed_everything(seed)")


_HOW = {"torch": "torch.manual_seed(seed)", "numpy": "np.random.seed(seed)",
        "random": "random.seed(seed)"}


def _family(script: Script, call: ast.Call) -> str | None:
    q = script.call_qualname(call) or ""
    if _TORCH_RNG.match(q):
        return "torch"
    if q.endswith("DataLoader") and is_true(kwarg(call, "shuffle")):
        return "torch"
    if q.startswith("numpy.random.") and "()" not in q:  # not RandomState(0).rand()
        name = q.rsplit(".", 1)[-1]
        if name == "default_rng":
            return "numpy" if not call.args and not call.keywords else None
        return None if name in _NUMPY_OK else "numpy"
    if q.startswith("random.") and q.count(".") == 1 and q.rsplit(".", 1)[-1] in _RANDOM_USE:
        return "random"
    return None


def _workers_seed_numpy(script: Script) -> bool:
    """Every DataLoader of the file has workers (``num_workers`` a positive constant): since
    PyTorch 1.9 each worker seeds numpy's and random's global generators from its torch seed
    (torch/utils/data/_utils/worker.py, pytorch/pytorch#56488), so a Dataset's draws run
    seeded when torch is."""
    loaders = [c for c in script.calls
               if (script.call_qualname(c) or "").endswith("DataLoader")]
    if not loaders:
        return False
    for c in loaders:
        n = const_eval(kwarg(c, "num_workers"))
        if not (isinstance(n, int) and n > 0):
            return False
    return True


def _in_dataset(script: Script, node: ast.AST) -> bool:
    cls = script.enclosing_class(node)
    return cls is not None and any((dotted(b) or "").endswith("Dataset") for b in cls.bases)
