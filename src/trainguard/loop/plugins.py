"""``trainguard train --callback MODULE:NAME``: callbacks of the user's own, by name."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from trainguard.errors import UsageError

__all__ = ["resolve_spec", "load_callback"]


def _split(spec: str) -> tuple[str, str]:
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise UsageError(f"--callback {spec!r}: expected MODULE:NAME or FILE.py:NAME, e.g. "
                         "my_callbacks.py:LogLR")
    return where, name


def _is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def resolve_spec(spec: str) -> str:
    """``spec`` with a file path made absolute (a module name is kept as it is)."""
    where, sep, name = spec.rpartition(":")
    if sep and where and _is_file(where):
        return f"{Path(where).expanduser().resolve()}:{name}"
    return spec


def _import(where: str, spec: str) -> Any:
    if not _is_file(where):
        try:
            return importlib.import_module(where)
        except ImportError as exc:
            raise UsageError(f"--callback {spec!r}: cannot import module {where!r} ({exc}); "
                             "is it on PYTHONPATH? A file works too: path/to/file.py:NAME") \
                from None
    path = Path(where)
    if not path.is_file():
        raise UsageError(f"--callback {spec!r}: file not found: {path}")
    module_name = f"trainguard_callbacks_{path.stem}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader_spec)  # type: ignore[arg-type]
    sys.modules[module_name] = module  # pickling (DataLoader workers) finds its classes
    loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def load_callback(spec: str) -> Any:
    """The callback ``spec`` names: a class is built without arguments, a function is called
    without arguments, anything else is used as it is.

    Raises:
        UsageError: a malformed spec, a module or file that cannot be loaded, or a missing name
            (the message quotes the ``--callback`` value).
    """
    where, name = _split(spec)
    module = _import(where, spec)
    if not hasattr(module, name):
        public = sorted(n for n in vars(module) if not n.startswith("_"))
        raise UsageError(f"--callback {spec!r}: {where} has no {name!r} (it defines "
                         f"{', '.join(public[:12]) or 'nothing'})")
    obj = getattr(module, name)
    from trainguard.loop.callbacks import HOOKS

    is_callback = not isinstance(obj, type) and any(callable(getattr(obj, h, None))
                                                    for h in HOOKS)
    if callable(obj) and not is_callback:  # a class, or a function that builds the callback
        try:
            obj = obj()
        except TypeError as exc:
            raise UsageError(f"--callback {spec!r}: {name}() needs arguments ({exc}); wrap it "
                             "in a function that builds it") from None
    return obj
