"""What a ``torch.save`` file's pickle names, read without unpickling it (``pickletools`` walks the
opcodes; nothing is imported or run): the strings it holds (a dict's keys) and whether it refers
to classes of this program (``__main__`` or a module loaded from a user file), which only this
program can have written. For TG701, on the rare path before a report."""

from __future__ import annotations

import pickletools
import sys
import types
import zipfile
from typing import Any

from trainguard.sanitize.core.frames import is_user_file

__all__ = ["read_pickle", "pickle_strings", "code_calls", "program_calls"]

_PICKLE_BYTES = 1 << 20  # a data.pkl larger than this is not read (tensors are stored apart)
_STRINGS = ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "SHORT_BINSTRING",
            "BINSTRING", "STRING")


# Globals that run code or touch the system when a pickle calls them: no checkpoint needs them
# (``weights_only=True`` refuses them all), and a tampered file's payload is made of them.
# Of the builtins, only plain data types are rebuilt by checkpoints; any other builtin called by
# a pickle (``exec``, ``eval``, ``getattr``, even ``print``) is code run at load.
_DATA_BUILTINS = {"set", "frozenset", "slice", "complex", "bytearray", "bytes", "int", "float",
                  "bool", "str", "tuple", "list", "dict", "range", "object"}
_RUNS_CODE_MODULES = {"os", "posix", "nt", "subprocess", "runpy", "pty", "socket", "shutil",
                      "importlib", "webbrowser", "code", "codeop", "ctypes", "sys", "pickle",
                      "_pickle", "marshal", "commands", "popen2", "multiprocessing"}
# Python 3's ``open`` pickles as ``io.open``: called by a pickle, it creates or truncates a file
# at load time (a payload's write); no checkpoint rebuilds an open file.
_OPENS_FILES = {("io", "open"), ("_io", "open"), ("io", "open_code"), ("_io", "open_code"),
                ("io", "FileIO"), ("_io", "FileIO"), ("codecs", "open")}


# What :func:`read_pickle` finds in an archive's pickle: its string constants, the
# ``(module, name)`` globals it names, and those it calls at load (``REDUCE``)
Pickled = tuple[set[str], set[tuple[str, str]], set[tuple[str, str]]]


def code_calls(found: Pickled | None) -> list[str]:
    """The globals of a ``torch.save`` archive's pickle (``found``: :func:`read_pickle`) whose
    call runs code or touches the system when the pickle is loaded (``builtins.exec`` and any
    builtin but a plain data type, ``os.system``, ``subprocess.Popen``, ``io.open``): a
    payload, whoever wrote the file. Empty when the pickle names none or cannot be read."""
    if found is None:
        return []
    return sorted(f"{'builtins' if m == '__builtin__' else m}.{n}" for m, n in found[1]
                  if m in ("builtins", "__builtin__") and n not in _DATA_BUILTINS
                  or m.split(".")[0] in _RUNS_CODE_MODULES or (m, n) in _OPENS_FILES)


def pickle_strings(found: Pickled | None) -> tuple[set[str] | None, bool]:
    """``(strings, own)`` for a ``torch.save`` zip archive's pickle (``found``:
    :func:`read_pickle`): its string constants (None when it cannot be read: not a zip archive,
    too large, malformed) and whether it names a class of this program (``__main__`` or a
    module whose file is the user's)."""
    if found is None:
        return None, False
    strings, names, _ = found
    return strings, any(_is_own(m) for m, _ in names)


def program_calls(found: Pickled | None) -> list[str]:
    """The functions of this program (``__main__`` or a user module, already imported: nothing is
    imported here) that a ``torch.save`` archive's pickle (``found``: :func:`read_pickle`) calls
    when it is loaded (``REDUCE``): a plain function, not a class, so the call is code of the
    program's choosing run at load, as a tampered file's ``__reduce__`` makes it. A checkpoint
    rebuilds tensors and classes only."""
    return [] if found is None else sorted(
        f"{m}.{n}" for m, n in found[2] if _is_own(m) and _is_function(m, n))


def _is_function(module: str, name: str) -> bool:
    obj: Any = sys.modules.get(module)
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return isinstance(obj, types.FunctionType)


_MARK = object()  # a MARK on the simulated pickle stack


def read_pickle(path: str) -> Pickled | None:
    """The string constants, the ``(module, name)`` globals, and the globals called by
    ``REDUCE``, of the pickle of the ``torch.save`` archive at ``path`` (its opcodes walked on a
    stack of placeholders, read once for all three readers above); None when it cannot be
    read."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next((n for n in archive.namelist() if n.endswith("/data.pkl")), None)
            if name is None or archive.getinfo(name).file_size > _PICKLE_BYTES:
                return None
            data = archive.read(name)
        strings: set[str] = set()
        names: set[tuple[str, str]] = set()
        called: set[tuple[str, str]] = set()
        stack: list[Any] = []
        memo: dict[Any, Any] = {}
        for op, arg, _ in pickletools.genops(data):
            if op.name in _STRINGS and isinstance(arg, str):
                strings.add(arg)
            _walk(op, arg, stack, memo, names, called)
    except Exception:  # not a zip archive, a truncated or foreign file: nothing known
        return None
    return strings, names, called


def _walk(op: Any, arg: Any, stack: list, memo: dict, names: set, called: set) -> None:
    """One opcode's effect on the placeholder stack: a global is ``(module, name)``, a string its
    value, anything else None; a ``REDUCE`` of a global adds it to ``called``."""
    if op.name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
        memo[len(memo) if op.name == "MEMOIZE" else arg] = stack[-1] if stack else None
        return
    if op.name in ("GET", "BINGET", "LONG_BINGET"):
        stack.append(memo.get(arg))
        return
    before = op.stack_before
    if pickletools.markobject in before:
        while stack and stack.pop() is not _MARK:
            pass
        popped = [stack.pop() if stack else None
                  for _ in range(before.index(pickletools.markobject))][::-1]
    else:
        popped = [stack.pop() if stack else None for _ in before][::-1]
    pushed: Any = None
    if op.name == "GLOBAL" and isinstance(arg, str):
        module, _, name = arg.partition(" ")
        pushed = (module, name)
    elif op.name == "STACK_GLOBAL" and all(isinstance(p, str) for p in popped):
        pushed = (popped[0], popped[1])
    elif op.name == "REDUCE" and isinstance(popped[0], tuple):
        called.add(popped[0])
    elif op.name in _STRINGS and isinstance(arg, str):
        pushed = arg
    elif op.name == "MARK":
        pushed = _MARK
    if isinstance(pushed, tuple):
        names.add(pushed)
    stack.extend([pushed] * len(op.stack_after))


def _is_own(module: str) -> bool:
    if module == "__main__":
        return True
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    return bool(path) and is_user_file(path)
