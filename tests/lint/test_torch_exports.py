"""The star-import tables match the installed torch, and star-imported names resolve."""

from __future__ import annotations

import ast
import importlib

import pytest

from trainguard.lint.script import Script
from trainguard.lint.torch_exports import EXPORTS, MODULES


@pytest.mark.parametrize("module", MODULES)
def test_every_listed_name_exists_in_the_installed_torch(module):
    mod = importlib.import_module(module)
    missing = sorted(n for n in EXPORTS[module] if not hasattr(mod, n))
    assert not missing, f"{module} no longer has {missing[:10]}: regenerate torch_exports.py"


def test_the_names_rules_look_for_are_listed():
    assert {"softmax", "log_softmax", "sigmoid", "no_grad", "save", "load"} <= EXPORTS["torch"]
    assert {"CrossEntropyLoss", "Dropout", "BatchNorm2d", "Softmax", "functional"} <= \
        EXPORTS["torch.nn"]
    assert {"softmax", "cross_entropy", "nll_loss", "dropout"} <= EXPORTS["torch.nn.functional"]
    assert "torch" not in EXPORTS["torch.nn.functional"]  # a module it imports, not its own


def _script(source: str) -> Script:
    return Script(source=source, path="s.py", tree=ast.parse(source))


@pytest.mark.parametrize("source,name,full", [
    ("from torch.nn.functional import *\n", "softmax", "torch.nn.functional.softmax"),
    ("from torch import *\n", "softmax", "torch.softmax"),
    ("from torch.nn.functional import *\nfrom torch import *\n", "softmax", "torch.softmax"),
    ("from torch import *\nfrom torch.nn.functional import *\n", "softmax",
     "torch.nn.functional.softmax"),
    ("from torch.nn import *\n", "CrossEntropyLoss", "torch.nn.CrossEntropyLoss"),
    ("from torch.nn import *\n", "functional.softmax", "torch.nn.functional.softmax"),
    ("from torch.optim import *\n", "SGD", "torch.optim.SGD"),
    # explicit imports and the file's own names win over a star import
    ("from torch.nn.functional import *\nfrom scipy.special import softmax\n", "softmax",
     "scipy.special.softmax"),
    ("from torch.nn.functional import *\ndef softmax(x):\n    return x\n", "softmax", "softmax"),
    ("from torch.nn.functional import *\nsoftmax = None\n", "softmax", "softmax"),
    ("from torch.nn.functional import *\ndef f(softmax):\n    return softmax\n", "softmax",
     "softmax"),
    ("from numpy import *\n", "softmax", "softmax"),  # not a torch module: unknown, unresolved
])
def test_star_imported_names_resolve(source, name, full):
    script = _script(source)
    assert script.qualname(ast.parse(name, mode="eval").body) == full
