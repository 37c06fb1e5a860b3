"""Whether a script asks to be reproducible, and which random number generators it seeds."""

from __future__ import annotations

import ast
import re
from functools import cached_property

from trainguard.lint.astutil import dotted, is_true
from trainguard.lint.script import Script

__all__ = ["Repro"]

_SEED_ALL = re.compile(r"(^|\.)(seed_everything|set_seed|seed_all|set_random_seed|fix_seed|"
                       r"setup_seed|init_seeds|seed_torch)$")


class Repro:
    def __init__(self, script: Script) -> None:
        self.script = script

    @cached_property
    def seeded(self) -> set[str]:
        """Families seeded somewhere in the file: ``torch``, ``numpy``, ``random``."""
        out: set[str] = set()
        for call in self.script.calls:
            q = self.script.call_qualname(call) or ""
            if q in ("torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed_all",
                     "torch.cuda.manual_seed"):
                out.add("torch")
            elif q in ("numpy.random.seed",):
                out.add("numpy")
            elif q == "random.seed":
                out.add("random")
            elif _SEED_ALL.search(q):
                out |= {"torch", "numpy", "random"}
        return out

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
