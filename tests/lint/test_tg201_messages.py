"""TG201's message and fix name the tensor to detach, also when it travels inside a dict or list
handed to a logger that keeps what it is given: a log dictionary appended to a list of step
outputs kept every batch's graph for an epoch (sktime/pytorch-forecasting#1924)."""

from __future__ import annotations

from trainguard.lint import lint_text

SCRIPT = '''
import torch
from torch import nn


class History:
    def __init__(self):
        self.rows = []

    def log(self, step, values):
        self.rows.append(values)


net = nn.Linear(4, 1)
opt = torch.optim.Adam(net.parameters())
history = History()
for step in range(10):
    opt.zero_grad()
    mse = (net(torch.randn(8, 4)) - 1).pow(2).mean()
    mse.backward()
    opt.step()
    history.log(step, ARG)
'''


def _finding(arg: str):
    found = [f for f in lint_text(SCRIPT.replace("ARG", arg)) if f.code == "TG201"]
    assert len(found) == 1, found
    return found[0]


def test_the_fix_names_the_tensor_inside_a_dict():
    f = _finding('{"mse": mse, "step": step}')
    assert f.line == 22
    assert f.fix.startswith("pass mse.item() (or mse.detach()) in {")
    assert '`history.log(step, {"mse": mse, "step": step})`' in f.message


def test_the_fix_names_the_tensor_inside_a_list_in_a_dict():
    f = _finding('{"terms": [step, mse]}')
    assert f.fix.startswith("pass mse.item() (or mse.detach()) in {")


def test_a_tensor_handed_alone_is_named_as_it_is():
    f = _finding("mse")
    assert f.fix == "pass mse.item() (or mse.detach())"


APPENDED = '''
import torch
from torch import nn

net = nn.Linear(4, 1)
opt = torch.optim.Adam(net.parameters())
history = []
for step in range(10):
    opt.zero_grad()
    mse = (net(torch.randn(8, 4)) - 1).pow(2).mean()
    mse.backward()
    opt.step()
    history.append({"mse": mse, "step": step})
'''


def test_a_dict_appended_to_a_list_names_the_tensor_inside_it():
    # a dict has no .detach(): the fix and its edit detach the entry that holds the graph
    import ast

    from trainguard.lint.fixes import apply_edits
    from trainguard.lint.rules import tg201_graph_kept_across_steps as rule
    from trainguard.lint.script import Script

    found = [f for f in lint_text(APPENDED) if f.code == "TG201"]
    assert len(found) == 1 and found[0].line == 13, found
    assert found[0].fix == 'store mse.detach() (or .item()) in {"mse": mse, "step": step}'
    script = Script(source=APPENDED, path="<appended>", tree=ast.parse(APPENDED))
    (hit,) = list(rule.check(script))
    fixed, count = apply_edits(APPENDED, hit.edits)
    assert count == 1
    assert 'history.append({"mse": mse.detach(), "step": step})' in fixed
    compile(fixed, "fixed.py", "exec")
