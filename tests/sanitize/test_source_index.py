"""The index of a parsed file (``core/source.py``) against ``ast.walk``: the same parents, calls
and functions, in the same order (a check reading ``file.parents`` in order takes the first
match)."""

import ast
import textwrap
from pathlib import Path

import pytest

from trainguard.sanitize.core import source

SNIPPET = textwrap.dedent("""
    import torch

    @torch.no_grad()
    @staticmethod
    def evaluate(model, loader):
        def inner(x):
            return [model(y) for y in x if (lambda z: z)(y) is not None]
        try:
            for x, y in loader:
                out = model(x).argmax(1)
        except* ValueError:
            def handler(): pass
        else:
            while True:
                async def later(): pass
                break
        finally:
            with torch.enable_grad():
                class Head:
                    def forward(self, x): return x
        match loader:
            case [first, *rest] if first:
                def matched(): pass
            case _:
                pass
        return inner
""")
FILES = [Path(source.__file__), Path(__file__).parents[1] / "integrations" / "scripts"
         / "lightning_app.py"]


def _walked(tree):
    parents, calls, functions = {}, {}, {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, ast.Call):
            calls.setdefault((node.lineno, node.col_offset), []).append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for line in (node.lineno, *(d.lineno for d in node.decorator_list)):
                functions.setdefault((node.name, line), node)
    return parents, calls, functions


@pytest.mark.parametrize("text", [SNIPPET] + [f.read_text() for f in FILES],
                         ids=["snippet"] + [f.name for f in FILES])
def test_index_matches_ast_walk(text):
    tree = ast.parse(text)
    parents, calls, functions = _walked(tree)
    file = source.SourceFile(tree)
    assert list(file.parents.items()) == list(parents.items())
    assert list(file.calls.items()) == list(calls.items())
    assert list(source._functions(tree).items()) == list(functions.items())


def test_functions_in_every_kind_of_block():
    found = {name for name, _ in source._functions(ast.parse(SNIPPET))}
    assert found == {"evaluate", "inner", "handler", "later", "forward", "matched"}
