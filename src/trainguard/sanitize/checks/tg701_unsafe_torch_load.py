"""TG701 unsafe-torch-load: ``torch.load`` that may unpickle arbitrary code.

What it watches: every ``torch.save`` path (to know the files this run wrote) and every
``torch.load`` call's keyword arguments.

When it fires: ``torch.load(path, weights_only=False)`` (from torch 2.6 the default is
``weights_only=True``; before 2.6, or with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``, a load without
``weights_only=True`` is unsafe too) on a file this run did not write, from a script that never
calls ``torch.save`` itself. A checkpoint is a pickle: loading one from elsewhere (a download, a
shared drive) runs whatever code it carries.

Silent on: ``weights_only=True`` or the torch >= 2.6 default; files written earlier in this run;
scripts that save their own checkpoints (resuming from one's own file); file objects and buffers;
loads made by a library's code (``accelerator.load_state()`` restores the objects registered for
checkpointing with ``weights_only=False``): only a ``torch.load`` in the user's code is a line the
user can change.

Cost: per ``torch.load``, its keyword arguments and one scan of the calling script's lines for
``torch.save(``.

Reference: ``torch.load`` docs (warning on ``weights_only=False``)
https://pytorch.org/docs/stable/generated/torch.load.html; PyTorch's security policy
https://github.com/pytorch/pytorch/blob/main/SECURITY.md#untrusted-models.
"""

from __future__ import annotations

import linecache
import os
import sys
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import is_trainguard_file, is_user_code, user_location


def _default_is_safe() -> bool:
    import torch

    if os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0") not in ("0", ""):
        return False
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 6)


class UnsafeTorchLoad(Check):
    code = "TG701"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.written: set[str] = set()
        self.safe_default: bool | None = None

    def on_save(self, obj: Any, f: Any) -> None:
        if isinstance(f, (str, os.PathLike)):
            self.written.add(os.path.abspath(os.fspath(f)))

    def on_load(self, f: Any, kwargs: dict) -> None:
        if not isinstance(f, (str, os.PathLike)):
            return
        weights_only = kwargs.get("weights_only")
        if weights_only is True:
            return
        if weights_only is None:
            if self.safe_default is None:
                self.safe_default = _default_is_safe()
            if self.safe_default:
                return
        path = os.path.abspath(os.fspath(f))
        if path in self.written or not _called_by_user(sys._getframe(1)):
            return
        where = user_location(sys._getframe(1))
        if where is not None and _saves_itself(where[0]):
            return
        how = "weights_only=False" if weights_only is False else \
            "no weights_only=True (this torch defaults to full unpickling)"
        self.report(
            f"torch.load({os.path.basename(path)!r}) with {how}: the file was not written by "
            "this run, and unpickling it runs any code it carries",
            fix="pass weights_only=True (allow extra types with "
                "torch.serialization.add_safe_globals), and load full pickles only from sources "
                "you trust",
            where=where)


def _called_by_user(frame: Any) -> bool:
    """Whether the code that called ``torch.load`` (the first frame outside trainguard) is the
    user's: a load inside a library (Accelerate's ``load_state`` of the objects registered for
    checkpointing) is that library's choice, and the user has no line to change."""
    while frame is not None and is_trainguard_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and is_user_code(frame.f_code)


def _saves_itself(path: str) -> bool:
    lines = linecache.getlines(path)
    return any("torch.save(" in line for line in lines)
