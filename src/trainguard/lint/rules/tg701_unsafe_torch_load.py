"""TG701 unsafe-torch-load: ``torch.load(..., weights_only=False)`` on a file from elsewhere.

``weights_only=False`` unpickles arbitrary objects, and unpickling can run code
(https://pytorch.org/docs/stable/generated/torch.load.html; CVE-2025-32434 covers even
``weights_only=True`` before torch 2.6). Since torch 2.6 ``weights_only=True`` is the default, so
a call without the argument stays silent; so does loading a path the same script saved with
``torch.save``.

Fix (unsafe): ``weights_only=True`` refuses checkpoints that pickle whole modules or custom
classes; save ``state_dict()`` instead, or allow-list classes with
``torch.serialization.add_safe_globals``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_false, kwarg
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG701"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    saved = {ast.unparse(c.args[1]) for c in script.calls
             if script.call_qualname(c) == "torch.save" and len(c.args) >= 2}
    for call in script.calls:
        if script.call_qualname(call) != "torch.load":
            continue
        flag = kwarg(call, "weights_only")
        if not is_false(flag):
            continue
        path = ast.unparse(call.args[0]) if call.args else "the file"
        if path in saved:
            continue
        assert flag is not None
        yield Hit(call, f"torch.load({path}, weights_only=False) unpickles whatever the file "
                        f"holds: a checkpoint from elsewhere can run code",
                  fix="pass weights_only=True (the default from torch 2.6); save state_dict()s, "
                      "or allow-list classes with torch.serialization.add_safe_globals",
                  edits=[Edit(flag.lineno, flag.col_offset, flag.end_lineno or flag.lineno,
                              flag.end_col_offset or 0, "True")], safe=False)
