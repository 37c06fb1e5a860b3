"""TG502 nondeterministic-algorithms: ``cudnn.benchmark = True`` in a run that asks to be
deterministic.

``cudnn.benchmark`` picks the fastest convolution algorithm by timing, which can differ between
runs (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking); it
undoes ``cudnn.deterministic = True`` / ``use_deterministic_algorithms(True)`` set elsewhere in
the same script. Silent when the two sit in opposite branches of one ``if`` (deterministic when a
seed is given, fast otherwise).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, is_true, parent
from trainguard.lint.repro import Repro
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG502"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    flags = Repro(script).deterministic_flags
    if not flags:
        return
    for node in script.nodes:
        if not (isinstance(node, ast.Assign) and is_true(node.value) and any(
                (dotted(t) or "").endswith("cudnn.benchmark") for t in node.targets)):
            continue
        if all(_exclusive(node, f) for f in flags):
            continue
        flag = flags[0]
        value = node.value
        yield Hit(node, f"cudnn.benchmark = True undoes the deterministic setting at "
                        f"{script.at(flag.lineno)}: convolution algorithms are chosen by "
                        f"timing and differ between runs",
                  fix="set torch.backends.cudnn.benchmark = False when the run must be "
                      "reproducible",
                  edits=[Edit(value.lineno, value.col_offset, value.end_lineno or value.lineno,
                              value.end_col_offset or 0, "False")], safe=False)


def _branches(node: ast.AST) -> dict[int, str]:
    out = {}
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, ast.If):
            out[id(p)] = "body" if n in p.body else "orelse" if n in p.orelse else "test"
        n = p
    return out


def _exclusive(a: ast.AST, b: ast.AST) -> bool:
    ba, bb = _branches(a), _branches(b)
    return any(k in bb and ba[k] != bb[k] for k in ba)
