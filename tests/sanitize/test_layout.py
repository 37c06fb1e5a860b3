"""The sanitizer's layout holds: no import circle, checks that see only the core, small units.

Read from the source (``ast``), not by importing it: every import counts, including those inside
functions and under ``if TYPE_CHECKING:``, since each ties the two modules together for a reader.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SANITIZE = Path(__file__).resolve().parents[2] / "src" / "trainguard" / "sanitize"
PACKAGE = "trainguard.sanitize"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SANITIZE.rglob("*.py")):
        parts = path.relative_to(SANITIZE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join((PACKAGE, *parts))] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``trainguard`` that module ``name`` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # ``from pkg import module`` names the module itself
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
    return {m for m in found if m.startswith("trainguard")}


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: {m for m in _imports(name, path, known) if m in known and m != name}
            for name, path in known.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` (its modules, first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_circle_and_passes_a_tree():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_in_sanitize():
    assert _cycle(_graph()) is None


def test_checks_import_only_the_core():
    known = _modules()
    outside = {}
    for name, path in known.items():
        if not name.startswith(f"{PACKAGE}.checks.tg"):
            continue
        bad = {m for m in _imports(name, path, known)
               if not m.startswith(f"{PACKAGE}.core")}
        if bad:
            outside[path.name] = sorted(bad)
    assert outside == {}


def _outside_packages(path: Path) -> set[str]:
    """The top-level packages other than ``trainguard`` that the file at ``path`` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - {"trainguard"}


def test_checks_import_nothing_but_torch_and_the_standard_library_besides():
    allowed = set(sys.stdlib_module_names) | {"torch"}
    outside = {path.name: sorted(_outside_packages(path) - allowed)
               for path in sorted((SANITIZE / "checks").glob("tg*.py"))}
    assert {k: v for k, v in outside.items() if v} == {}


def test_the_import_readers_see_every_form(tmp_path):
    source = tmp_path / "tgx.py"
    source.write_text("import numpy.random as npr\nfrom __future__ import annotations\n"
                      "def f():\n    from trainguard.sanitize.probes import patch\n"
                      "    from .core.check import Check\n    import torch.nn\n")
    known = {"trainguard.sanitize.probes.patch": source, "trainguard.sanitize.core.check": source}
    assert _imports("trainguard.sanitize.tgx", source, known) == {
        "trainguard.sanitize.probes.patch", "trainguard.sanitize.core.check"}
    assert _outside_packages(source) == {"numpy", "__future__", "torch"}


def test_only_check_files_in_checks():
    names = sorted(p.name for p in (SANITIZE / "checks").glob("*.py"))
    assert [n for n in names if not (n.startswith("tg") or n == "__init__.py")] == []


def test_core_imports_no_probe_check_or_watcher():
    graph = _graph()
    leaks = {name: sorted(m for m in deps if not m.startswith(f"{PACKAGE}.core"))
             for name, deps in graph.items() if name.startswith(f"{PACKAGE}.core")}
    assert {k: v for k, v in leaks.items() if v} == {}


@pytest.mark.parametrize("name", sorted(_modules()))
def test_module_and_function_sizes(name):
    path = _modules()[name]
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path}: {len(text.splitlines())} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == [], f"{path}: {long}"
