"""TG501 unseeded-run: a script that seeds some random generators uses others unseeded.

A run is reproducible only if every generator it draws from is seeded
(https://pytorch.org/docs/stable/notes/randomness.html): ``torch`` (weight init, ``randn``,
shuffling DataLoaders, dropout), ``numpy.random`` and Python's ``random``. Fires only when the
script asks to be reproducible (it seeds at least one generator or sets deterministic flags), and
only for generators it actually uses; a seed the script defines (config key, ``--seed`` option,
``SEED`` constant) that nothing but a print reads is such a request too, and so is one handed only
to a library's own generator (``train_test_split(..., random_state=SEED)``: one finding where
torch's seed belongs, :func:`_library_only`). ``seed_everything``/``set_seed`` helpers count as
seeding all three. A seeding helper of the file that seeds numpy and random but not torch, called
by code that does not seed torch, fires at its last seeding line (:func:`_partial_helpers`); so
does one that seeds torch but not numpy or random when the script draws from them (one finding
naming the draws, where the missing seeds belong), and so do the script's own seeding calls
(``np.random.seed(seed)`` with torch drawn unseeded: the last seeding call of the function that
holds the first one). Draws made by functions of another project file that the script calls (a data
helper's ``np.random.rand``, a batching generator's ``random.shuffle``) count, named by the call.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, is_true, kwarg, parent
from trainguard.lint.consts import const_eval
from trainguard.lint.options import _argparse_dest
from trainguard.lint.repro import SEED_CALLS, Repro, in_fork_rng, in_unused_function, seeds_in
from trainguard.lint.seed_order import drawn_before_seed
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
    skipped = list(_zero_seed_skipped(script))
    if skipped:  # the run is unseeded as configured: one finding, at the test
        yield from skipped
        return
    helpers = list(_partial_helpers(script))
    yield from helpers  # (their fix is torch's seed: its first draw is not reported again)
    yield from _before_seed(script)
    repro = Repro(script)
    setting = None
    if not repro.seeded:
        setting = _unapplied_seed(script) or _stored_seed(script)
        if setting is None:
            return  # a script that seeds nothing has not asked for reproducible runs
    first: dict[str, ast.AST] = {}
    seeded_workers = _workers_seed_numpy(script)
    yield from _fresh_generators(script, repro, setting)
    for call in sorted(script.calls, key=lambda c: (c.lineno, c.col_offset)):
        if _fresh(script, call):
            continue  # reported above, where the seed is missing
        family = _family(script, call)
        if family in ("numpy", "random") and seeded_workers and _in_dataset(script, call):
            continue  # drawn in DataLoader workers, which seed numpy and random per worker
        if family and family not in repro.seeded and family not in first and \
                not (family == "torch" and helpers):
            first[family] = call
    for family, call in _project_draws(script, seeded_workers).items():  # another file's
        if family not in repro.seeded and family not in first:
            first[family] = call
    if setting is not None and len(setting) > 2:  # the seed went to a library's own draw alone
        if "torch" in first:
            yield _library_only(script, setting, first["torch"])
        return
    forgotten = _forgotten_helper(script, setting) if setting and first else None
    if forgotten is not None:  # one call is missing: reported once, where it belongs
        yield forgotten
        return
    seeded = ", ".join(sorted(repro.seeded)) or "nothing"
    place = None
    if setting is None and first:
        helper = _seeding_helper(script)
        if helper is not None:  # the file's own seeding helper leaves these out: its last line
            place = (helper[1], f"{helper[0].name}() seeds {seeded}", "the script")
        elif (at := _seed_site(script)) is not None:  # so do its own seeding calls: beside them
            place = (at, f"the script seeds {seeded} here", "it")
    if place is not None:
        at, lead, who = place
        families = sorted(first)
        draws = script.at_lines(sorted(first[f].lineno for f in families))
        yield Hit(at, f"{lead} but not {' or '.join(families)}, which {who} draws from unseeded "
                      f"({draws}): runs differ even with the same seed",
                  fix=f"seed them here too ({'; '.join(_HOW[f] for f in families)}), or call "
                      f"trainguard.seed_everything(seed)")
        return
    for family, node in first.items():
        asks = f"seeds {seeded}" if setting is None else \
            f"sets a seed ({setting[0]} at {script.at(setting[1])}) that nothing applies"
        yield Hit(node, f"the script {asks} but draws from {family}'s random generator "
                        f"here unseeded: runs differ even with the same seed",
                  fix=f"seed {family} too ({_HOW[family]}), or call "
                      f"trainguard.seed_everything(seed)")


def _before_seed(script: Script) -> Iterator[Hit]:
    """A model built, or torch drawn from, before the one statement that seeds torch
    (:mod:`trainguard.lint.seed_order`): reported at the draw."""
    def is_draw(call: ast.Call) -> bool:
        return _family(script, call) == "torch" and not _draws_the_seed(script, call) and \
            not in_fork_rng(script, call)

    for draw, seed in drawn_before_seed(script, is_draw):
        model = not is_draw(draw)  # type: ignore[arg-type]
        what = "builds a model whose initial weights are drawn" if model else "draws"
        yield Hit(draw, f"this {what} from torch's generator before "
                        f"{ast.unparse(seed.func)}() seeds it ({script.at(seed.lineno)}): the "
                        f"seed does not govern {'them' if model else 'this draw'}, which "
                        f"come from whatever state the generator was left in (another seed "
                        f"gives the same values; a second run in the process, other ones)",
                  fix=f"call {ast.unparse(seed.func)}(...) before this line")


_FRESH = {"numpy.random.default_rng": "numpy", "numpy.random.RandomState": "numpy",
          "random.Random": "random"}


def _fresh(script: Script, call: ast.Call) -> str | None:
    """``np.random.default_rng()``, ``np.random.RandomState()``, ``random.Random()`` without a
    seed (or with ``None``): a generator of its own, started from OS entropy, that no global
    seed reaches (https://numpy.org/doc/stable/reference/random/generator.html). Its family;
    None when the name it is stored under is seeded or given a state later (``rs.seed(i)``,
    ``rng.bit_generator.state = ...``)."""
    family = _FRESH.get(script.call_qualname(call) or "")
    args = [*call.args, *(k.value for k in call.keywords)]
    if family is None or not all(isinstance(a, ast.Constant) and a.value is None for a in args):
        return None
    up = parent(call)
    if isinstance(up, ast.Assign) and len(up.targets) == 1:
        name = (dotted(up.targets[0]) or "").rsplit(".", 1)[-1]
        if not name or re.search(rf"\b{re.escape(name)}\s*\.\s*(seed|set_state|setstate|"
                                 rf"__setstate__|bit_generator\s*\.\s*state\s*=)", script.source):
            return None
    return None if _draws_the_seed(script, call) else family


def _draws_the_seed(script: Script, call: ast.Call) -> bool:
    """The generator draws the run's seed: the statement around ``call`` binds a name
    (``SEED = int(np.random.default_rng().integers(2**31))``) that a seeding call of the file
    is given (``torch.manual_seed(SEED)``): a fresh seed, drawn to be logged, that then seeds the
    run (the draw picks the seed, not the data)."""
    stmt = parent(call)
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = parent(stmt)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    return any(SEED_CALLS.get(script.call_qualname(c) or "") and any(
        isinstance(n, ast.Name) and n.id == name for a in c.args for n in ast.walk(a))
        for c in script.calls)


def _fresh_generators(script: Script, repro: Repro, setting: tuple | None) -> Iterator[Hit]:
    """Each unseeded generator of its own the script builds (:func:`_fresh`), once per
    family, in a run that asks to be reproducible: seeding the global generators leaves it
    where it was, so the finding goes where the seed is missing."""
    seen = set()
    for call in sorted(script.calls, key=lambda c: (c.lineno, c.col_offset)):
        family = _fresh(script, call)
        if family is None or family in seen or in_unused_function(script, call):
            continue
        seen.add(family)
        asks = f"seeds {', '.join(sorted(repro.seeded))}" if setting is None else \
            f"sets a seed ({setting[0]} at {script.at(setting[1])})"
        built = ast.unparse(call.func)
        yield Hit(call, f"the script {asks} but builds {built}() here without a seed: it starts "
                        f"from OS entropy, which no global seed reaches, so runs differ even "
                        f"with the same seed",
                  fix=f"pass the run's seed: {built}(seed)")


_HOW = {"torch": "torch.manual_seed(seed)", "numpy": "np.random.seed(seed)",
        "random": "random.seed(seed)"}


def _seed_site(script: Script) -> ast.Call | None:
    """The last of the file's own global seeding calls (``np.random.seed(seed)``) in the
    function (or module code) that holds the first one: where the missing seeds belong."""
    calls = sorted((c for c in script.calls if SEED_CALLS.get(script.call_qualname(c) or "")
                    in ("torch", "numpy", "random")), key=lambda c: (c.lineno, c.col_offset))
    if not calls:
        return None
    scope = script.enclosing_function(calls[0])
    return [c for c in calls if script.enclosing_function(c) is scope][-1]


def _seeding_helper(script: Script) -> tuple[ast.FunctionDef, ast.Call] | None:
    """The one called function of the file whose body only seeds generators from its argument
    (``def set_seed(seed): torch.manual_seed(seed)``) and its last seeding call."""
    found = []
    for funcs in script.functions.values():
        for func in funcs:
            seeds = _seeding_body(script, func, least=1)
            if seeds and script.call_sites(func):
                found.append((func, max(seeds, key=lambda c: c.lineno)))
    return found[0] if len(found) == 1 else None


def _partial_helpers(script: Script) -> Iterator[Hit]:
    """A seeding helper of the file (a function whose statements only seed generators from its
    argument: ``np.random.seed(seed); random.seed(seed)``) that leaves torch out, called by
    code that does not seed torch itself, in a program that uses torch: each call resets
    numpy and random and leaves torch's generator where it was, so a second fit with the same
    seed starts from another state (ourownstory/neural_prophet#147). Reported at the helper's
    last seeding line, where ``torch.manual_seed(seed)`` belongs."""
    if "torch" not in script.aliases.values() and "import torch" not in script.source:
        return
    for funcs in script.functions.values():
        for func in funcs:
            seeds = _seeding_body(script, func)
            if not seeds or "torch" in seeds.values():
                continue
            sites = script.call_sites(func)
            if not sites or any(_seeds_torch_around(script, site) for site in sites):
                continue
            plain = [c for c in seeds if parent(parent(c)) is func]  # under no `if cuda:`
            last = max(plain or seeds, key=lambda c: c.lineno)
            families = set(seeds.values())
            done = " and ".join(sorted(families - {"cuda"} or families))
            if "cuda" in families:
                done += " (torch.cuda's seed reaches the GPUs only)"
            yield Hit(last, f"{func.name}() seeds {done} but not torch: each call (as at "
                            f"{script.at(sites[0].lineno)}) resets those and leaves torch's "
                            f"generator (weight init, shuffling, dropout) where it was, so two "
                            f"runs with the same seed start from different states",
                      fix=f"seed torch here too: torch.manual_seed({ast.unparse(last.args[0])})"
                      if last.args else "seed torch here too: torch.manual_seed(seed)")


def _seeding_body(script: Script, func: ast.AST, least: int = 2) -> dict[ast.Call, str]:
    """The seeding calls of ``func`` (call -> generator family) when every statement of its body
    seeds a generator from one of its parameters (a docstring, ``os.environ[...] = ...`` and
    deterministic flags aside; an ``if`` whose branches do the same, ``if cuda:
    torch.cuda.manual_seed_all(seed)``), else an empty dict."""
    params = {a.arg for a in func.args.args + func.args.kwonlyargs}  # type: ignore[attr-defined]
    found: dict[ast.Call, str] = {}
    if not _seeding_stmts(script, func.body, params, found):  # type: ignore[attr-defined]
        return {}
    return found if len(found) >= least else {}


def _seeding_stmts(script: Script, stmts: list[ast.stmt], params: set[str],
                   found: dict[ast.Call, str]) -> bool:
    """Every statement of ``stmts`` seeds from ``params`` (see :func:`_seeding_body`); the
    seeding calls are added to ``found``."""
    for stmt in stmts:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Assign):
            # os.environ["PYTHONHASHSEED"] = str(seed), cudnn flags; seed = self.cfg["seed"]
            params |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            continue
        if isinstance(stmt, ast.If):
            if not _seeding_stmts(script, stmt.body + stmt.orelse, params, found):
                return False
            continue
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        family = SEED_CALLS.get(script.call_qualname(call) or "") if isinstance(call, ast.Call) \
            else None
        if family is None:
            return False
        if not any(isinstance(n, ast.Name) and n.id in params for a in call.args  # type: ignore
                   for n in ast.walk(a)):
            return False
        found[call] = family  # type: ignore[index]
    return True


def _seeds_torch_around(script: Script, site: ast.AST) -> bool:
    """The function that calls the helper (or the module, at top level) seeds torch itself."""
    scope = script.enclosing_function(site) or script.tree
    return any(isinstance(c, ast.Call) and SEED_CALLS.get(script.call_qualname(c) or "") == "torch"
               for c in ast.walk(scope) if not isinstance(scope, ast.Module) or
               script.enclosing_function(c) is None)


_SEED_NAME = re.compile(r"^(random_|global_|manual_)?seed$", re.I)
_SHOWN = {"print", "str", "repr", "format", "info", "debug", "warning", "log", "write"}


def _unapplied_seed(script: Script) -> tuple | None:
    """A seed the script defines (a ``"seed"`` config key, a ``--seed`` argument, a ``SEED``
    constant) and never hands to anything but printing, or a library's own generator (see
    :func:`_own_rng_of_library`): the run asks to be reproducible, and nothing seeds torch.
    ``(how it is written, line)``, plus the first library call given it, or None."""
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
    libraries: list[ast.Call] = []
    for node in script.nodes:
        read = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and
                isinstance(node.slice.value, str) and _SEED_NAME.match(node.slice.value)) or \
            (isinstance(node, ast.Attribute) and _SEED_NAME.match(node.attr) and
             isinstance(node.ctx, ast.Load) and not _called(node)) or \
            (isinstance(node, ast.Name) and _SEED_NAME.match(node.id) and
             isinstance(node.ctx, ast.Load))
        if not read or _only_shown(node) or in_unused_function(script, node):
            continue
        library = _own_rng_of_library(script, node)
        if library is None:
            return None  # handed to something: a generator, a helper, a library's helper
        libraries.append(library)
    return (*setting, min(libraries, key=lambda c: c.lineno)) if libraries else setting


# Libraries whose ``random_state=``/``seed=`` argument seeds a generator of their own (scikit-learn
# builds a ``np.random.RandomState`` from it: https://scikit-learn.org/stable/glossary.html
# #term-random_state) and never torch's: none of them imports torch.
_OWN_RNG = frozenset({"sklearn", "scipy", "imblearn", "xgboost", "lightgbm", "catboost",
                      "statsmodels", "umap"})
_OWN_RNG_ARGS = frozenset({"random_state", "seed", "random_seed"})


def _own_rng_of_library(script: Script, node: ast.AST) -> ast.Call | None:
    """The call when ``node`` is the value of its ``random_state=``/``seed=`` argument (as is,
    or with a number added: ``SEED + fold``) and it is a function or class of a library in
    :data:`_OWN_RNG` (``train_test_split(X, y, random_state=SEED)``): that seeds the library's
    draw alone, not torch's global generator."""
    p = parent(node)
    while isinstance(p, ast.BinOp):
        p = parent(p)
    if not isinstance(p, ast.keyword) or p.arg not in _OWN_RNG_ARGS:
        return None
    call = parent(p)
    q = script.call_qualname(call) or ""
    return call if q.split(".", 1)[0] in _OWN_RNG else None  # type: ignore[return-value]


def _library_only(script: Script, setting: tuple, draw: ast.AST) -> Hit:
    """The seed reaches only a library's own generator (``train_test_split(...,
    random_state=SEED)``) while torch draws unseeded: one finding where torch's seed belongs,
    the first statement of the function holding torch's first draw (the run's own code when that
    draw is at the top level: the draw itself)."""
    name, line, call = setting
    func = script.enclosing_function(draw)
    body = [st for st in func.body if not (isinstance(st, ast.Expr) and isinstance(
        st.value, ast.Constant))] if func is not None else []  # (a docstring aside)
    library = (script.call_qualname(call) or "").rsplit(".", 1)[-1]
    return Hit(body[0] if body else draw,
               f"the seed ({name} at {script.at(line)}) goes only to {library}() at "
               f"{script.at(call.lineno)}, which seeds that library's own draw; torch's global "
               f"generator (the draw at {script.at(draw.lineno)}, weight init, dropout masks) is "
               "never seeded: runs differ even with the same seed",
               fix=f"seed torch where the run starts: torch.manual_seed({name})")


def _forgotten_helper(script: Script, setting: tuple[str, int]) -> Hit | None:
    """A seeding helper of the script (``def set_seed(seed): torch.manual_seed(seed); ...``)
    that nothing calls, with a seed setting nothing applies: the one call is missing. Reported
    where the seed becomes known (the ``parse_args()`` statement for a ``--seed`` option, else
    the setting's line), where the call belongs."""
    helpers = [f for f in script.tree.body if isinstance(f, ast.FunctionDef)
               and in_unused_function(script, f.body[0]) and _seeding_body(script, f, least=1)]
    if not helpers:
        return None
    known = [c for c in script.calls if isinstance(c.func, ast.Attribute)
             and c.func.attr == "parse_args" and c.lineno > setting[1]]
    at = known[0] if setting[0].startswith("-") and known else next(
        (n for n in script.nodes if isinstance(n, ast.stmt) and n.lineno == setting[1]), None)
    if at is None:
        return None
    name = helpers[0].name
    return Hit(at, f"{name}() (at {script.at(helpers[0].lineno)}) seeds the random generators "
                   f"but nothing calls it, and the seed ({setting[0]} at "
                   f"{script.at(setting[1])}) is applied nowhere: every run draws different "
                   "weights, dropout masks and data order",
               fix=f"call {name}(seed) once the seed is known, before the model is built")


def _called(node: ast.AST) -> bool:
    """``g.manual_seed`` in ``g.manual_seed(123)``: a method called, not a seed setting read."""
    p = parent(node)
    return isinstance(p, ast.Call) and p.func is node


def _stored_seed(script: Script) -> tuple[str, int] | None:
    """A ``seed`` parameter that a model's method only stores on ``self`` (``self.seed = seed``
    in ``__init__(self, ..., seed=1024)`` of an ``nn.Module``), whose attribute nothing reads but
    printing: the model promises seeded runs and never seeds (shenweichen/DeepCTR-Torch#100).
    ``(self.attr, line)``, or None."""
    for funcs in script.functions.values():
        for func in funcs:
            params = {a.arg for a in func.args.args[1:] + func.args.kwonlyargs
                      if _SEED_NAME.match(a.arg)}
            if not params or not func.args.args or func.args.args[0].arg != "self" or \
                    not _module_class(script, script.enclosing_class(func)):
                continue
            uses = [n for n in ast.walk(func) if isinstance(n, ast.Name) and n.id in params
                    and isinstance(n.ctx, ast.Load)]
            stores = [u for u in uses if isinstance(parent(u), ast.Assign)
                      and parent(u).value is u and len(parent(u).targets) == 1
                      and isinstance(parent(u).targets[0], ast.Attribute)
                      and dotted(parent(u).targets[0].value) == "self"]
            if len(uses) != 1 or len(stores) != 1:
                continue
            attr = parent(stores[0]).targets[0].attr
            if any(isinstance(n, ast.Attribute) and n.attr == attr and
                   isinstance(n.ctx, ast.Load) and not _only_shown(n) for n in script.nodes):
                continue
            return f"self.{attr}", stores[0].lineno
    return None


def _module_class(script: Script, cls: ast.ClassDef | None, depth: int = 4) -> bool:
    """``cls`` is an ``nn.Module`` (a model whose weights the seed should fix), through the
    file's own base classes."""
    if cls is None or depth == 0:
        return False
    for base in cls.bases:
        name = dotted(base) or ""
        if name.endswith("Module"):
            return True
        if _module_class(script, script.classes.get(name), depth - 1):
            return True
    return False


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
    if _TORCH_RNG.match(q):  # (not with a generator of its own: torch.rand(n, generator=g))
        gen = kwarg(call, "generator")
        return "torch" if gen is None or (isinstance(gen, ast.Constant) and gen.value is None) \
            else None
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


# Methods an instance runs by being built, called, iterated or indexed: ``gen =
# BatchGenerator(...)`` then ``next(gen)`` runs ``__next__``.
_RUN_BY_USE = ("__init__", "__call__", "__iter__", "__next__", "__getitem__")


def _project_draws(script: Script, seeded_workers: bool = False) -> dict[str, ast.Call]:
    """Family -> the file's first call of a function of another project file whose own body
    draws from that family's global generator (``downsample_negatives(examples)`` in
    ``helpers.py`` calling ``np.random.rand``; ``random.shuffle`` in a batching generator):
    the run draws from it through that call. A class of another file counts by the methods
    its instances run when built, called, iterated or indexed (a batch generator drawing in
    ``__next__``), and by a method called on an instance (``gen.sample()``); a ``Dataset``
    when every DataLoader has workers, which seed numpy and random, does not. Bodies only,
    one level deep."""
    found: dict[str, ast.Call] = {}
    if not script.project_imports:
        return found
    for call in sorted(script.calls, key=lambda c: (c.lineno, c.col_offset)):
        for other, func in _project_bodies(script, call, seeded_workers):
            for inner in ast.walk(func):
                family = _family(other, inner) if isinstance(inner, ast.Call) else None
                if family in ("numpy", "random") and family not in found:
                    found[family] = call
    return found


def _project_bodies(script: Script, call: ast.Call, seeded_workers: bool
                    ) -> list[tuple[Script, ast.AST]]:
    """The functions of another project file that ``call`` runs (see :func:`_project_draws`),
    each with the file that holds it."""
    name = dotted(call.func)
    if not name or name.split(".")[0] not in script.project_imports:
        if not isinstance(call.func, ast.Attribute):
            return []
        return [(t.script, t.func) for t in script.targets(call)[:2]  # gen.sample()
                if t.script is not script and t.bound and not t.instance]
    ref = script.graph.class_named(name)
    if ref is not None:
        if seeded_workers and any(b.endswith("Dataset") for b in script.graph.bases(ref)):
            return []
        methods = [script.graph.method(ref, m) for m in _RUN_BY_USE]
        return [(m.script, m.func) for m in methods if m is not None]
    return [(t.script, t.func) for t in script.targets(call)[:2]
            if t.script is not script and isinstance(t.func, ast.FunctionDef)]


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


# Help text that gives 0 a meaning of its own ("0 = random", "0 disables seeding").
_ZERO_MEANS = re.compile(r"\b0\s*(=|means|for|:|to\b|disables)|\bzero\s+(=|means|for|to)|"
                         r"disabl|\bnone\b|unseeded|no seed|not seed", re.I)


def _zero_seed_skipped(script: Script) -> Iterator[Hit]:
    """Seeding under a test of the seed's truth (``if cfg.get("seed"):``, ``if args.seed:``)
    while the file configures that seed as 0 (a config entry, an option's default, a parameter
    default, a constant): 0 is false, so the seeding calls never run and the run draws unseeded
    (ashleve/lightning-hydra-template#635; huggingface/diffusers#10964). Silent when the test
    compares (``is not None``), an ``else`` seeds, the option's help gives 0 a meaning of its
    own, or nothing draws from a generator the branch seeds."""
    for node in script.nodes:
        if not isinstance(node, ast.If):
            continue
        found = _seed_name(node.test)
        if found is None:
            continue
        name, how = found
        calls = [c for st in node.body for c in ast.walk(st) if isinstance(c, ast.Call)]
        seeded = seeds_in(script, calls, depth=2, local=True) & {"torch", "numpy", "random"}
        other = [c for st in node.orelse for c in ast.walk(st) if isinstance(c, ast.Call)]
        if not seeded or seeds_in(script, other, depth=2, local=True):
            continue
        zero = _configured_zero(script, name, how)
        if zero is None or not any(_family(script, c) in seeded for c in script.calls):
            continue
        yield Hit(node.test, f"the seed `{name}` is configured as 0 (at {script.at(zero)}), and "
                             f"0 is false, so this test skips the seeding of "
                             f"{', '.join(sorted(seeded))}: the run is not seeded at all",
                  fix=f"test `{ast.unparse(node.test)} is not None` instead of its truth")
        return


def _seed_name(test: ast.expr) -> tuple[str, str] | None:
    """The seed whose truth ``test`` is, and how it is read: ``("seed", "name")`` for ``seed``,
    ``"attribute"`` for ``args.seed``, ``"entry"`` for ``cfg["seed"]`` or ``cfg.get("seed")``
    (a name with "seed" in it); None for anything else."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
            test.func.attr == "get" and len(test.args) == 1 and not test.keywords:
        test = ast.Subscript(value=test.func.value, slice=test.args[0])
    if isinstance(test, ast.Subscript) and isinstance(test.slice, ast.Constant):
        name, how = test.slice.value, "entry"
    elif isinstance(test, ast.Attribute):
        name, how = test.attr, "attribute"
    elif isinstance(test, ast.Name):
        name, how = test.id, "name"
    else:
        return None
    return (name, how) if isinstance(name, str) and "seed" in name.lower() else None


def _configured_zero(script: Script, name: str, how: str) -> int | None:
    """The line where the file gives the seed ``name`` the value 0, where a seed read as
    ``how`` comes from: for an entry, a dict display or ``dict(seed=0)``; for an attribute, an
    option's default (unless its help says what 0 means), a field of a class of the file
    (``seed: int = 0``) or a keyword of its construction; for a name, a parameter default or an
    assignment (also ``SEED = 0``). None when it gives none."""
    classes = set(script.classes)
    for node in script.nodes:
        value: ast.AST | None = None
        if how == "entry" and isinstance(node, ast.Dict):
            value = next((v for k, v in zip(node.keys, node.values)
                          if isinstance(k, ast.Constant) and k.value == name), None)
        elif how != "name" and isinstance(node, ast.keyword) and node.arg == name and \
                isinstance(parent(node), ast.Call):
            made = dotted(parent(node).func) or ""  # type: ignore[union-attr]
            value = node.value if (how == "entry" and made == "dict" or
                                   how == "attribute" and made in classes) else None
        elif how == "attribute" and isinstance(node, ast.Call) and \
                isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            if _argparse_dest(node) == name and \
                    not _ZERO_MEANS.search(str(const_eval(kwarg(node, "help")))):
                value = kwarg(node, "default")
        elif how == "attribute" and isinstance(node, ast.AnnAssign) and \
                isinstance(node.target, ast.Name) and node.target.id == name and \
                isinstance(parent(node), ast.ClassDef):
            value = node.value
        elif how == "name" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for a, d in zip(args.args[::-1], args.defaults[::-1]):
                value = d if a.arg == name else value
        elif how == "name" and isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            value = node.value if node.targets[0].id in (name, name.upper()) else None
        if isinstance(value, ast.Constant) and value.value == 0 and \
                type(value.value) is int:
            return value.lineno
    return None
