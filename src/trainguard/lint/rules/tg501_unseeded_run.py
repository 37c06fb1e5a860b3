"""TG501 unseeded-run: a script that seeds some random generators uses others unseeded.

A run is reproducible only if every generator it draws from is seeded
(https://pytorch.org/docs/stable/notes/randomness.html): ``torch`` (weight init, ``randn``,
shuffling DataLoaders, dropout), ``numpy.random`` and Python's ``random``. Fires only when the
script asks to be reproducible (it seeds at least one generator or sets deterministic flags), and
only for generators it actually uses; a seed the script defines (config key, ``--seed``
option, ``SEED`` constant) that nothing but a print reads is such a request too. ``seed_everything``/``set_seed`` helpers count as seeding
all three.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, is_true, kwarg, parent
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
    setting = None
    if not repro.seeded:
        setting = _unapplied_seed(script)
        if setting is None:
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
        asks = f"seeds {seeded}" if setting is None else \
            f"sets a seed ({setting[0]} at {script.at(setting[1])}) that nothing applies"
        yield Hit(node, f"the script {asks} but draws from {family}'s random generator "
                        f"here unseeded: runs differ even with the same seed",
                  fix=f"seed {family} too ({_HOW[family]}), or call "
                      f"trainguard.seed_everything(seed)")


_HOW = {"torch": "torch.manual_seed(seed)", "numpy": "np.random.seed(seed)",
        "random": "random.seed(seed)"}


_SEED_NAME = re.compile(r"^(random_|global_|manual_)?seed$", re.I)
_SHOWN = {"print", "str", "repr", "format", "info", "debug", "warning", "log", "write"}


def _unapplied_seed(script: Script) -> tuple[str, int] | None:
    """A seed the script defines (a ``"seed"`` config key, a ``--seed`` argument, a ``SEED``
    constant) and never hands to anything but printing: the run asks to be reproducible, and
    nothing seeds it. ``(how it is written, line)``, or None."""
    if "seed" not in script.source.lower():
        return None
    setting = None
    for node in script.nodes:
        if isinstance(node, ast.Dict):
            for k in node.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and \
                        _SEED_NAME.match(k.value):
                    setting = setting or (f'"{k.value}"', k.lineno)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and _SEED_NAME.match(t.id) for t in node.targets) and \
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            setting = setting or (ast.unparse(node.targets[0]), node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "add_argument" and node.args and \
                isinstance(node.args[0], ast.Constant) and \
                _SEED_NAME.match(str(node.args[0].value).lstrip("-").replace("-", "_")):
            setting = setting or (str(node.args[0].value), node.lineno)
    if setting is None:
        return None
    for node in script.nodes:
        read = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and
                isinstance(node.slice.value, str) and _SEED_NAME.match(node.slice.value)) or \
            (isinstance(node, ast.Attribute) and _SEED_NAME.match(node.attr) and
             isinstance(node.ctx, ast.Load)) or \
            (isinstance(node, ast.Name) and _SEED_NAME.match(node.id) and
             isinstance(node.ctx, ast.Load))
        if read and not _only_shown(node):
            return None  # handed to something: a generator, a helper, a library
    return setting


def _only_shown(node: ast.AST) -> bool:
    """The value is only printed or formatted."""
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, (ast.FormattedValue, ast.JoinedStr)):
            return True
        if isinstance(p, ast.Call):
            return (dotted(p.func) or "").rsplit(".", 1)[-1] in _SHOWN
        if isinstance(p, (ast.stmt, ast.Lambda, ast.comprehension)):
            return False
        n = p
    return False


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
