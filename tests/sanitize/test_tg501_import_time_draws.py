"""Draws made by a library's import-time code are not the run's (TG501), and the imports probe
that tells them apart (``probes/imports.py``).

Each script runs in a temporary folder holding the user's modules; ``site-packages/`` inside it
holds the stand-in libraries (a file under ``site-packages`` is a library's, as for the lines a
finding points at). Module names are unique per test: ``sys.modules`` is shared by the tests.
"""

from __future__ import annotations

import sys
import textwrap
import uuid

import pytest

from sanitize_helpers import run_in_process
from trainguard.sanitize.probes.imports import is_library_module

# the head of every script: the stand-in libraries' folder goes on sys.path
HEAD = ("import os, sys\n"
        "sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
        "'site-packages'))\n")
# a library whose top-level code draws from random and numpy (as rich's style module draws
# getrandbits(24), https://github.com/Textualize/rich/blob/master/rich/style.py)
DRAWING_LIBRARY = textwrap.dedent("""\
    import random
    import numpy as np
    _ID = random.getrandbits(24)
    _TABLE = np.random.rand(4)
    def sample():
        return random.random()
""")


def _run(tmp_path, script: str, **modules: str) -> list[tuple[str, int]]:
    """Run ``script`` (after :data:`HEAD`) with ``modules`` (``name=text``; a name starting with
    ``lib`` goes into ``site-packages/``); returns the ``(code, line)`` of its findings, lines
    counted in ``script``. ``{x}`` in any text is this test's unique suffix."""
    tag = uuid.uuid4().hex[:8]
    (tmp_path / "site-packages").mkdir()
    for name, text in modules.items():
        folder = tmp_path / "site-packages" if name.startswith("lib") else tmp_path
        (folder / f"{name}_{tag}.py").write_text(text.replace("{x}", tag))
    path = tmp_path / "train.py"
    path.write_text(HEAD + script.replace("{x}", tag))
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    head = HEAD.count("\n")
    return [(f.code, f.line - head) for f in watcher.findings]


def test_a_lazy_import_inside_a_function_is_not_the_runs_draw(tmp_path):
    script = textwrap.dedent("""\
        import torch
        torch.manual_seed(0)
        def evaluate():
            import lib_{x}
            return 1
        evaluate()
        x = torch.randn(3)
    """)
    assert _run(tmp_path, script, lib=DRAWING_LIBRARY) == []


def test_a_library_imported_by_a_library_at_import_is_excused_too(tmp_path):
    outer = "import lib_{x}\nimport tempfile\nVALUE = 1\n"
    script = "import torch\ntorch.manual_seed(0)\nimport libouter_{x}\n"
    assert _run(tmp_path, script, lib=DRAWING_LIBRARY, libouter=outer) == []


@pytest.mark.parametrize("helper, expected", [
    # the user's helper module draws at import: its own top-level code is the user's
    ("import numpy as np\nIDX = np.random.permutation(10)\n", [("TG501", 2)]),
    # ... also after importing a library that draws (the library's draw alone is excused)
    ("import lib_{x}\nimport random\nFILES = list(range(9))\nrandom.shuffle(FILES)\n",
     [("TG501", 2)]),
    # ... and a function of it called later draws: the user's draw, as before
    ("import random\ndef pick():\n    return random.random()\n", [("TG501", 2)]),
    # the helper only imports the drawing library: nothing of the user's is drawn
    ("import lib_{x}\nVALUE = 1\n", []),
])
def test_a_user_helper_module_draws_as_the_user(tmp_path, helper, expected):
    script = ("import torch\ntorch.manual_seed(0)\nimport helper_{x} as helper\n"
              "if hasattr(helper, 'pick'):\n    helper.pick()\n")
    assert _run(tmp_path, script, lib=DRAWING_LIBRARY, helper=helper) == expected


def test_a_user_module_imported_by_a_library_at_import_draws_as_the_user(tmp_path):
    # a library that imports the user's plugin module at import: the plugin's shuffle counts
    library = "import lib_{x}\nimport plugin_{x}\n"
    plugin = "import random\nORDER = list(range(5))\nrandom.shuffle(ORDER)\n"
    script = "import torch\ntorch.manual_seed(0)\nimport libhost_{x}\n"
    assert _run(tmp_path, script, lib=DRAWING_LIBRARY, libhost=library,
                plugin=plugin) == [("TG501", 2)]


def test_a_draw_before_the_import_is_still_seen(tmp_path):
    script = "import random\nimport torch\ntorch.manual_seed(0)\nrandom.random()\nimport lib_{x}\n"
    assert _run(tmp_path, script, lib=DRAWING_LIBRARY) == [("TG501", 3)]


def test_a_library_function_called_by_the_run_still_draws_for_it(tmp_path):
    # an installed library's function that draws from random at run time (not at import)
    script = "import torch\ntorch.manual_seed(0)\nimport lib_{x}\nlib_{x}.sample()\n"
    assert _run(tmp_path, script, lib=DRAWING_LIBRARY) == [("TG501", 2)]


def test_the_probe_marks_the_outermost_library_stretch_around_user_modules(tmp_path):
    from trainguard.config import Config
    from trainguard.sanitize.core.check import Check
    from trainguard.sanitize.watcher import Watcher

    seen: list[tuple[str, str]] = []

    class Recorder(Check):
        code = "TG501"

        def on_library_import_pre(self, name: str) -> None:
            seen.append(("start", name))

        def on_library_import(self, name: str) -> None:
            seen.append(("end", name))

    tag = uuid.uuid4().hex[:8]
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / f"liba_{tag}.py").write_text(f"import libb_{tag}\n")
    (tmp_path / "site-packages" / f"libb_{tag}.py").write_text(f"import user_{tag}\nX = 1\n")
    (tmp_path / f"user_{tag}.py").write_text(f"import libc_{tag}\n")
    (tmp_path / "site-packages" / f"libc_{tag}.py").write_text("Y = 2\n")
    sys.path[:0] = [str(tmp_path), str(tmp_path / "site-packages")]
    watcher = Watcher(config=Config(), checks=[Recorder]).start()
    try:
        __import__(f"liba_{tag}")
        __import__(f"liba_{tag}")  # imported already: no module code runs, no event
    finally:
        watcher.stop()
        del sys.path[:2]
        for name in ("liba", "libb", "libc", "user"):
            sys.modules.pop(f"{name}_{tag}", None)
    assert seen == [("start", f"liba_{tag}"), ("end", f"user_{tag}"),  # the user's code runs
                    ("start", f"libc_{tag}"), ("end", f"libc_{tag}"),  # its own library import
                    ("start", f"user_{tag}"), ("end", f"liba_{tag}")]  # back in libb, then liba


def test_the_probe_puts_the_import_machinery_back():
    from trainguard.config import Config
    from trainguard.sanitize.watcher import Watcher

    bootstrap = sys.modules["_frozen_importlib"]
    original = bootstrap._load_unlocked
    watcher = Watcher(config=Config()).start()
    try:
        assert bootstrap._load_unlocked is not original  # TG501 listens
    finally:
        watcher.stop()
    assert bootstrap._load_unlocked is original


def test_which_modules_are_a_librarys():
    import importlib.util

    assert is_library_module(importlib.util.find_spec("json"))  # the standard library
    assert is_library_module(importlib.util.find_spec("sys"))  # built in: no file
    assert is_library_module(importlib.util.find_spec("numpy"))  # an installed package
    assert not is_library_module(importlib.util.find_spec("sanitize_helpers"))  # the user's


# pytorch/examples' MNIST script (https://github.com/pytorch/examples/blob/main/mnist/main.py)
# seeds torch alone; here its evaluation imports scikit-learn's metrics lazily, whose import
# reaches rich's style module and its import-time ``getrandbits(24)``
MNIST_LIKE = textwrap.dedent("""\
    import random
    import torch
    from torch import nn

    torch.manual_seed(1)

    def evaluate(model, x, y):
        before = random.getstate()
        from sklearn.metrics import f1_score
        print("import drew from random:", random.getstate() != before)
        return f1_score(y.numpy(), model(x).argmax(1).numpy(), average="macro")

    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    for step in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    with torch.no_grad():
        print("f1", evaluate(model.eval(), x, y))
""")


@pytest.mark.slow
def test_a_lazy_scikit_learn_import_under_trainguard_run_is_silent(tmp_path):
    from sanitize_helpers import run_tg

    pytest.importorskip("sklearn")
    (tmp_path / "train.py").write_text(MNIST_LIKE)
    done = run_tg("run", "train.py", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    if "import drew from random: True" not in done.stdout:
        pytest.skip("this scikit-learn's import draws nothing from random")
    assert "TG501" not in done.stderr, done.stderr
