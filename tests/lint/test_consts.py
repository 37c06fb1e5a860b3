"""The constant evaluator and branch reasoning the rules share: values the program fixes, and
nothing else."""

from __future__ import annotations

import ast

import pytest

from trainguard.lint.astutil import parent
from trainguard.lint.consts import UNKNOWN, const_eval, truth
from trainguard.lint.script import Script

PROGRAM = '''
CFG = dict(epochs=12, accum=32)
OPTS = {"act": "softmax", "sizes": [64, 32]}
EPOCHS = 10
a = CFG["epochs"]
b = OPTS.get("act")
c = OPTS.get("missing", 3)
d = OPTS.get("missing")
e = int(0.6 * EPOCHS)
f = unknown_call()
g = OPTS["sizes"][-1]
'''


def _values() -> dict[str, object]:
    script = Script(source=PROGRAM, path="<consts>", tree=ast.parse(PROGRAM))
    out = {}
    for node in script.tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = const_eval(node.value)
    return out


@pytest.mark.parametrize("name, value", [
    ("CFG", {"epochs": 12, "accum": 32}), ("a", 12), ("b", "softmax"), ("c", 3), ("d", None),
    ("e", 6), ("f", UNKNOWN), ("g", 32),
])
def test_values_the_program_fixes(name, value):
    assert _values()[name] == value


def test_truth_with_a_parameter_bound_to_a_dict():
    tree = ast.parse('OPTS = {"act": "softmax"}\n'
                     'def build(cfg):\n'
                     '    if cfg.get("act") == "softmax":\n'
                     '        pass\n'
                     'build(OPTS)\n')
    Script(source="", path="<t>", tree=tree)  # links parents
    test = tree.body[1].body[0].test
    call = tree.body[2].value
    assert parent(test) is not None
    assert truth(test) is None  # the parameter alone is unknown
    assert truth(test, env={"cfg": call.args[0]}) is True
