"""loop/ stays readable: no import circle between its modules, no function over 60 lines, no
module over 300 lines. Read from the source with ast (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parents[2] / "src" / "trainguard" / "loop"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 300


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), filename=str(p)) for p in sorted(LOOP.glob("*.py"))}


def loop_imports(tree: ast.Module) -> set[str]:
    """The loop/ modules a module imports, at its top or inside a function (a lazy import
    closes a circle just the same)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "trainguard.loop":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("trainguard.loop."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names
                      if a.name.startswith("trainguard.loop.")}
    return found


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def function_lengths(tree: ast.Module) -> dict[str, int]:
    """Lines of each function and method from ``def`` to its last line, its docstring not
    counted (documentation is not what makes a reader scroll through logic)."""
    lengths = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = node.end_lineno - node.lineno + 1
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None),
                                                        ast.Constant) \
                    and isinstance(doc.value.value, str):
                span -= doc.end_lineno - doc.lineno + 1
            lengths[f"{node.name} (line {node.lineno})"] = span
    return lengths


def test_loop_has_no_import_circle():
    graph = {name: loop_imports(tree) & set(_modules()) for name, tree in _modules().items()}
    assert graph["fit"], "the import reader found nothing: it is broken"
    assert find_circle(graph) is None, f"import circle in loop/: {find_circle(graph)}"


def test_no_function_in_loop_is_over_60_lines():
    long = {f"{name}.py: {fn}": n for name, tree in _modules().items()
            for fn, n in function_lengths(tree).items() if n > MAX_FUNCTION_LINES}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_module_in_loop_is_over_300_lines():
    long = {p.name: n for p in LOOP.glob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


@pytest.mark.parametrize("source,expected", [
    ("from trainguard.loop.fit import fit\nimport torch", {"fit"}),
    ("def f():\n    from trainguard.loop import step, driver\n", {"step", "driver"}),
    ("import trainguard.loop.cli as c\nfrom trainguard.ckpt import io", {"cli"}),
])
def test_the_import_reader_sees_top_level_and_lazy_imports(source, expected):
    assert loop_imports(ast.parse(source)) == expected


def test_the_circle_finder_and_the_length_reader_catch_what_they_must():
    assert find_circle({"cli": {"train"}, "train": {"fit"}, "fit": {"cli"}}) == [
        "cli", "train", "fit", "cli"]
    assert find_circle({"cli": {"train"}, "train": {"fit"}, "fit": set()}) is None
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    lengths = function_lengths(ast.parse(f'def f():\n    """doc\n\n    more"""\n{body}\n'))
    assert lengths == {"f (line 1)": 62}
