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
h = sorted((30, 10, 20))
i = list(OPTS["sizes"])
j = tuple(unknown_call())
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
    ("e", 6), ("f", UNKNOWN), ("g", 32), ("h", [10, 20, 30]), ("i", [64, 32]), ("j", UNKNOWN),
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


RUN = '''
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=30)
parser.add_argument("--step-size", dest="decay", type=int, default=7)
parser.add_argument("--amp", action="store_true")
parser.add_argument("--data", required=True)
args = parser.parse_args()
SETTINGS = {"epochs": 4}


def train(settings, width=8):
    epochs = settings["epochs"]
    return width


class Trainer:
    def __init__(self, cfg):
        self.cfg = cfg

    def fit(self):
        return self.cfg["epochs"]


train(SETTINGS)
Trainer({"epochs": 9}).fit()
'''


@pytest.mark.parametrize("text, value", [
    ("args.epochs", 30), ("args.decay", 7), ("args.amp", False), ("args.data", UNKNOWN),
    ("args.missing", UNKNOWN), ('settings["epochs"]', 4), ("width", 8),
    ('self.cfg["epochs"]', 9),
])
def test_resolve_reads_options_parameters_and_attributes(text, value):
    from trainguard.lint.consts import resolve

    script = Script(source=RUN, path="<run>", tree=ast.parse(RUN))
    where = {"settings": "train", "width": "train", "self": "fit"}.get(text.split(".")[0]
                                                                      .split("[")[0])
    scope = script.tree if where is None else script.functions[where][0]
    anchor = scope.body[-1]
    expr = ast.parse(text, mode="eval").body
    for node in ast.walk(expr):
        node._tg_parent = anchor  # type: ignore[attr-defined]
    expr._tg_parent = anchor  # type: ignore[attr-defined]
    expr.lineno = anchor.lineno  # type: ignore[attr-defined]
    assert resolve(script, expr) == value


NESTED = '''
CONFIG = {"exp": {"train": {"epochs": 6}, "optim": {"sched": {"step_size": 3}}}}
exp = CONFIG["exp"]
sched = exp["optim"]["sched"]
size = sched["step_size"]


def fit(cfg, n):
    optim_cfg = cfg["exp"]["optim"]
    sched_cfg = optim_cfg["sched"]
    m = optim_cfg["sched"]
    if n:
        m = optim_cfg
    return sched_cfg["step_size"], m["step_size"]


fit(CONFIG, 2)
'''


def test_nested_config_read_through_aliases():
    from trainguard.lint.consts import resolve

    script = Script(source=NESTED, path="<nested>", tree=ast.parse(NESTED))
    size = script.tree.body[3]
    assert const_eval(size.value) == 3  # four levels of literal and three aliases
    ret = script.functions["fit"][0].body[-1].value
    assert resolve(script, ret.elts[0]) == 3  # locals read through to the parameter
    assert resolve(script, ret.elts[1]) is UNKNOWN  # a local given two values stays unknown
