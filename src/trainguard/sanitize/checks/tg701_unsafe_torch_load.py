"""TG701 unsafe-torch-load: ``torch.load`` that may unpickle arbitrary code.

What it watches: every ``torch.save`` path (the files this run wrote) and every ``torch.load``
call's keyword arguments.

When it fires: ``torch.load(path, weights_only=False)`` (from torch 2.6 the default is
``weights_only=True``; before 2.6, or with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``, a load without
``weights_only=True`` is unsafe too) in the user's code, on a file whose origin is not this
program: not written by a ``torch.save`` of this process (to the path, through an open file, or to
a name renamed onto it), not pickling this program's own classes (``__main__`` or the user's modules, read
from the pickle's opcodes without unpickling), and not in the format of the program's own save
function (a ``torch.save`` of a dict literal whose keys the file's pickle does not all hold), and
not named by a ``torch.save`` in another script beside the loading one (a data-generation script
run first: ``torch.save(data, open('traindata.pt', 'wb'))`` in pytorch/examples'
time_sequence_prediction/generate_sine_wave.py, which its train.py loads). A
file written during this run by other code in a single process (``open(p, "wb").write(download(
url))``, ``shutil.copyfileobj``) is judged without the program's-own-format rule: no earlier run
of the program's save function wrote it. Under torchrun or with watched children, a file another
process wrote during the run is judged by the program's own format (a rank's own save). A
checkpoint is a pickle: loading one from elsewhere (a download, a shared drive) runs whatever code
it carries. Whatever its origin, a file whose pickle calls a global that runs code
(``builtins.exec``, ``os.system``: ecmwf/anemoi-core#1416; ``io.open``, which creates a file at
load: kyutai-labs/moshi#408) is reported, also when this process
wrote it (a "download" helper filling a cache): no checkpoint needs such a call. A pickle that
calls a plain function of this program (a ``__reduce__`` returning it: code run at load,
vinnylarouge/jevlike#3) is reported too, unless this process torch.saved that very file.
Reported at the line that chose ``weights_only``: the ``torch.load`` call, or, when a loader hands
its keyword arguments on (``torch.load(path, **load_kwargs)``), the caller that wrote
``weights_only=False``.

Silent on: ``weights_only=True`` or the torch >= 2.6 default; files this process torch.saved;
resumes of the program's own format (a ``torch.save`` of a variable counts as any format); files
that pickle the program's own classes; file objects and buffers; loads made by a library's code
(``torch.hub.load_state_dict_from_url`` inside torchvision, ``accelerator.load_state()``): only a
``torch.load`` in the user's code is a line the user can change.

Cost: per ``torch.load``, its keyword arguments; per unsafe load, one read of its pickle's
opcodes (1 MB at most); only before a report, one ``stat`` of the file, one parse of the calling
file and of at most 64 scripts beside it.

Reference: ``torch.load`` docs (warning on ``weights_only=False``)
https://pytorch.org/docs/stable/generated/torch.load.html; PyTorch's security policy
https://github.com/pytorch/pytorch/blob/main/SECURITY.md#untrusted-models.
"""

from __future__ import annotations

import ast
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import (
    frame_location, is_trainguard_file, is_user_code, user_frame, user_location)
from trainguard.sanitize.core.pickled import (code_calls, pickle_strings, program_calls,
                                              read_pickle)
from trainguard.sanitize.core.source import SourceFile


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
        self.started = time.time()  # a file modified since was written during this run

    def on_save(self, obj: Any, f: Any) -> None:
        name = _file_name(f)
        if name is not None:
            self.written.add(os.path.realpath(name))

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
        if not _called_by_user(sys._getframe(1)):
            return
        how = "weights_only=False" if weights_only is False else \
            "no weights_only=True (this torch defaults to full unpickling)"
        saved_here = os.path.realpath(path) in self.written or self._moved_here(path)
        # whoever wrote it (a hub cache, a "download" helper, a tampered copy); a call of the
        # program's own function, unless this process torch.saved the file there itself
        found = read_pickle(path)
        payload = code_calls(found) or ([] if saved_here else program_calls(found))
        if payload:
            self.report(
                f"torch.load({os.path.basename(path)!r}) with {how}: the file's pickle calls "
                f"{', '.join(payload[:3])} when it is unpickled, so loading it runs code",
                fix="pass weights_only=True, which refuses such a payload (allow extra types "
                    "with torch.serialization.add_safe_globals)",
                where=_where_chosen(sys._getframe(1)))
            return
        if saved_here:
            return
        # Written during this run, but not by a torch.save of this process: by another process of
        # this program (a rank, a child: its own save function may have written it), or by raw
        # bytes (a download, a copy), which the program's own save function never wrote.
        fresh = _modified_since(path, self.started)
        family = getattr(self.bus, "family", None)
        alone = fresh and self.bus.ranks is None and not getattr(family, "count", 0)
        where = user_location(sys._getframe(1))
        strings, own = pickle_strings(found)
        if own or (where is not None and (_written_by_sibling(where[0], path) or (
                not alone and _saved_by_program(where[0], strings)))):
            return
        origin = ("was written during this run by code other than torch.save (raw bytes: a "
                  "download or a copy)" if alone else "was not written by this run")
        self.report(
            f"torch.load({os.path.basename(path)!r}) with {how}: the file {origin}, and "
            "unpickling it runs any code it carries",
            fix="pass weights_only=True (allow extra types with "
                "torch.serialization.add_safe_globals), and load full pickles only from sources "
                "you trust",
            where=_where_chosen(sys._getframe(1)) or where)


    def _moved_here(self, path: str) -> bool:
        """A file this process saved beside ``path`` and that is gone: saved to a temporary name
        and renamed onto ``path`` (an atomic save)."""
        folder = os.path.dirname(os.path.realpath(path))
        return any(os.path.dirname(w) == folder and not os.path.exists(w) for w in self.written)


def _where_chosen(frame: Any) -> Any:
    """The user's line that chose ``weights_only``: the innermost user call passing it by name,
    climbing from a helper's ``torch.load(path, **load_kwargs)`` to the caller that wrote
    ``weights_only=False`` (4 frames at most); else the innermost user call."""
    first = None
    frame = user_frame(frame)
    for _ in range(4):
        if frame is None:
            break
        where = frame_location(frame)
        first = first or where
        file = SourceFile.load(where[0])
        call = file.call_at(where[1], where[2] - 1) if file is not None else None
        if call is None:
            break
        if any(k.arg == "weights_only" for k in call.keywords):
            return where
        if not any(k.arg is None for k in call.keywords):  # nothing handed on by **kwargs
            break
        frame = user_frame(frame.f_back)
    return first


def _file_name(f: Any) -> str | None:
    """The path ``torch.save`` writes to: a path, or an open file's ``name`` (``path`` for
    fsspec's local files); None for a buffer."""
    if isinstance(f, (str, os.PathLike)):
        name: Any = os.fspath(f)
    else:
        name = getattr(f, "name", None) or getattr(f, "path", None)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    return name if isinstance(name, str) and name else None


def _called_by_user(frame: Any) -> bool:
    """Whether the code that called ``torch.load`` (the first frame outside trainguard) is the
    user's: a load inside a library (Accelerate's ``load_state`` of the objects registered for
    checkpointing) is that library's choice, and the user has no line to change."""
    while frame is not None and is_trainguard_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and is_user_code(frame.f_code)


# File times come from the kernel's coarse clock, which may lag time.time() by up to a tick
# (a few ms): a file written a few ms after the watcher started could carry an earlier mtime.
_MTIME_SLACK = 0.05


def _modified_since(path: str, started: float) -> bool:
    try:
        return os.path.getmtime(path) >= started - _MTIME_SLACK
    except OSError:
        return False


def _saved_by_program(path: str, strings: set[str] | None) -> bool:
    """Whether a ``torch.save`` in the user's file ``path`` (or the script run as ``__main__``)
    writes files like the one loaded: a save of a dict literal whose string keys all appear in the
    loaded file's pickle (``strings``; None when it could not be read), or, when the save's
    object is not a dict literal (a variable), any ``torch.save`` call: a resume of the program's
    own format."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    files = [path] + ([main] if main and main != path else [])
    for name in files:
        for node in _torch_saves(name):
            saved = node.args[0]
            if not isinstance(saved, ast.Dict) or strings is None:
                return True
            keys = {k.value for k in saved.keys if isinstance(k, ast.Constant)
                    and isinstance(k.value, str)}
            if keys and keys <= strings:
                return True
    return False


_SIBLINGS = 64  # scripts beside the loading one read for a torch.save naming the loaded file


def _written_by_sibling(calling: str, loaded: str) -> bool:
    """Whether another ``.py`` file in the calling file's directory has a ``torch.save`` whose
    destination names the loaded file (a string constant with the same base name, directly or
    inside ``open(...)``/``os.path.join(...)``): the project's own script wrote it."""
    base = os.path.basename(loaded)
    folder = os.path.dirname(calling)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))[:_SIBLINGS]
    except OSError:
        return False
    for name in names:
        other = os.path.join(folder, name)
        if os.path.abspath(other) == os.path.abspath(calling):
            continue
        for node in _torch_saves(other):
            if (len(node.args) >= 2
                    and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                            and os.path.basename(c.value) == base
                            for c in ast.walk(node.args[1]))):
                return True
    return False


def _torch_saves(path: str) -> Iterator[ast.Call]:
    """The ``torch.save(obj, ...)`` calls in the file ``path`` (none when it cannot be parsed)."""
    tree = parse_file(path)
    for node in ast.walk(tree) if tree is not None else ():
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "save" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "torch" and node.args):
            yield node
