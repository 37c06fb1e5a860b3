"""Whether a script asks to be reproducible, and which random number generators it seeds."""

from __future__ import annotations

import ast
import re
from functools import cached_property

from trainguard.lint.astutil import dotted, is_main_guard, is_true, parent, walk_local
from trainguard.lint.script import Script

__all__ = ["Repro", "SEED_CALLS", "in_fork_rng", "in_unused_function", "seeds_in"]

_SEED_ALL = re.compile(r"(^|\.)(seed_everything|set_seed|seed_all|set_random_seed|fix_seed|"
                       r"setup_seed|init_seeds|seed_torch)$")


class Repro:
    def __init__(self, script: Script) -> None:
        self.script = script

    @cached_property
    def seeded(self) -> set[str]:
        """Families seeded somewhere in the file: ``torch``, ``numpy``, ``random``."""
        return seeds_in(self.script, self.script.calls, depth=3)

    @cached_property
    def deterministic_flags(self) -> list[ast.AST]:
        """``cudnn.deterministic = True`` and ``use_deterministic_algorithms(True)`` nodes."""
        out: list[ast.AST] = []
        for node in self.script.nodes:
            if isinstance(node, ast.Assign) and is_true(node.value) and any(
                    (dotted(t) or "").endswith("cudnn.deterministic") for t in node.targets):
                out.append(node)
            elif isinstance(node, ast.Call) and (self.script.call_qualname(node) or "").endswith(
                    "use_deterministic_algorithms") and node.args and is_true(node.args[0]):
                out.append(node)
        return out

    @property
    def asks(self) -> bool:
        return bool(self.seeded or self.deterministic_flags)


_TORCH_SEEDS = ("torch.manual_seed", "torch.random.manual_seed",
                "torch.default_generator.manual_seed", "torch.random.default_generator.manual_seed")
SEED_CALLS = {**dict.fromkeys(_TORCH_SEEDS, "torch"), "numpy.random.seed": "numpy",
              "random.seed": "random", "torch.cuda.manual_seed": "cuda",
              "torch.cuda.manual_seed_all": "cuda"}
"""The calls that seed a global generator (qualified name -> ``torch``, ``numpy``, ``random``,
``cuda``). ``torch.cuda.manual_seed(_all)`` seeds only the GPUs' generators ("silently ignored"
without CUDA: https://pytorch.org/docs/stable/generated/torch.cuda.manual_seed.html); weights
initialised on the CPU and CPU draws stay unseeded, so it does not count as seeding torch."""


def seeds_in(script: Script, calls, *, depth: int,  # type: ignore[no-untyped-def]
             local: bool = False) -> set[str]:
    """The generators ``calls`` seed. A seeding helper of the project (``setup_seed(cfg)``
    defined in this file or one it imports) seeds what its body seeds (one of this file only
    with ``local``: otherwise its calls are among those read already); only a helper the
    project cannot see (Lightning's or transformers' ``seed_everything``/``set_seed``) counts
    as seeding all three by its name."""
    out: set[str] = set()
    unused = _never_called(script)
    for call in calls:
        q = script.call_qualname(call) or ""
        if in_fork_rng(script, call):
            continue  # seeds only the draws inside the block; the run itself is unseeded
        if unused and _top_function(call) in unused:
            continue  # a helper nothing in the file calls or names seeds nothing in this run
        if q in SEED_CALLS:
            out.add(SEED_CALLS[q])
        elif "seed" in q.lower():
            targets = script.targets(call)
            if targets:
                if depth > 0:
                    for t in targets:
                        if local or t.script is not script:
                            body = [c for c in walk_local(t.func) if isinstance(c, ast.Call)]
                            out |= seeds_in(t.script, body, depth=depth - 1)
            elif _SEED_ALL.search(q):
                out |= {"torch", "numpy", "random"}
    return out


def in_fork_rng(script: Script, node: ast.AST) -> bool:
    """Inside ``with torch.random.fork_rng():``, whose state is restored when the block ends
    (https://pytorch.org/docs/stable/random.html#torch.random.fork_rng)."""
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body and any(
                (script.call_qualname(i.context_expr) or "").endswith("fork_rng")
                for i in p.items):
            return True
        n = p
    return False


def _top_function(node: ast.AST) -> str | None:
    """The name of the module-level function whose body holds ``node``, or None."""
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(
                parent(p), ast.Module):
            return p.name
        n = p
    return None


def _never_called(script: Script) -> set[str]:
    """Module-level functions of a script (a file with ``if __name__ == "__main__":``) that no
    code of the file calls or names (a ``set_seed(seed)`` defined and forgotten): what they would
    seed is never seeded. A file without that guard may be imported for its helpers: none.
    Memoised per file."""
    memo = script.__dict__
    if "_tg_never_called" not in memo:
        memo["_tg_never_called"] = _unnamed_functions(script)
    return memo["_tg_never_called"]


def _unnamed_functions(script: Script) -> set[str]:
    tree = script.tree
    if not any(is_main_guard(n) for n in tree.body):
        return set()
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | \
        {e.value for e in ast.walk(tree) if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return defined - named


def in_unused_function(script: Script, node: ast.AST) -> bool:
    """Whether ``node`` lies in a module-level function that nothing in the script calls."""
    unused = _never_called(script)
    return bool(unused) and _top_function(node) in unused
