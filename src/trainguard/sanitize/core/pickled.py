"""What a ``torch.save`` file's pickle names, read without unpickling it (``pickletools`` walks the
opcodes; nothing is imported or run): the strings it holds (a dict's keys) and whether it refers
to classes of this program (``__main__`` or a module loaded from a user file), which only this
program can have written. For TG701, on the rare path before a report."""

from __future__ import annotations

import pickletools
import sys
import zipfile
from typing import Any

from trainguard.sanitize.core.frames import is_user_file

__all__ = ["pickle_strings", "code_calls"]

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


def code_calls(path: str) -> list[str]:
    """The globals of the ``torch.save`` archive at ``path`` whose call runs code or touches the
    system when the pickle is loaded (``builtins.exec`` and any builtin but a plain data type,
    ``os.system``, ``subprocess.Popen``, ``io.open``):
    a payload, whoever wrote the file. Empty when the pickle names none or cannot be read."""
    found = _read(path)
    if found is None:
        return []
    return sorted(f"{'builtins' if m == '__builtin__' else m}.{n}" for m, n in found[1]
                  if m in ("builtins", "__builtin__") and n not in _DATA_BUILTINS
                  or m.split(".")[0] in _RUNS_CODE_MODULES or (m, n) in _OPENS_FILES)


def pickle_strings(path: str) -> tuple[set[str] | None, bool]:
    """``(strings, own)`` for the ``torch.save`` zip archive at ``path``: the string constants of
    its pickle (None when it cannot be read: not a zip archive, too large, malformed) and whether
    it names a class of this program (``__main__`` or a module whose file is the user's)."""
    found = _read(path)
    if found is None:
        return None, False
    strings, names = found
    return strings, any(_is_own(m) for m, _ in names)


def _read(path: str) -> tuple[set[str], set[tuple[str, str]]] | None:
    """The string constants and the ``(module, name)`` globals of the archive's pickle."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next((n for n in archive.namelist() if n.endswith("/data.pkl")), None)
            if name is None or archive.getinfo(name).file_size > _PICKLE_BYTES:
                return None
            data = archive.read(name)
        strings: set[str] = set()
        names: set[tuple[str, str]] = set()
        recent: list[Any] = []
        for op, arg, _ in pickletools.genops(data):
            if op.name in _STRINGS and isinstance(arg, str):
                strings.add(arg)
                recent = (recent + [arg])[-2:]
            elif op.name == "GLOBAL" and isinstance(arg, str):
                module, _, name = arg.partition(" ")
                names.add((module, name))
            elif op.name == "STACK_GLOBAL" and len(recent) == 2:
                names.add((recent[0], recent[1]))
            elif op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
                recent = recent if op.name in _STRINGS else []
    except Exception:  # not a zip archive, a truncated or foreign file: nothing known
        return None
    return strings, names


def _is_own(module: str) -> bool:
    if module == "__main__":
        return True
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    return bool(path) and is_user_file(path)
