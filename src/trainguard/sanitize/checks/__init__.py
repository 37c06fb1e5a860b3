"""The runtime checks: one file per catalogue code (``tgNNN_name.py``), found by :func:`discover`.

How to write one: ``docs/sanitizer.md`` ("How to write a check") and the base class,
:class:`trainguard.sanitize.core.check.Check`.
"""

from __future__ import annotations

import importlib
import pkgutil

from trainguard.sanitize.core.check import EVENTS, Check, Diagnosis

__all__ = ["Check", "Diagnosis", "discover", "EVENTS"]


_found: list[type[Check]] | None = None  # what the first discover() found (files do not change)


def discover() -> list[type[Check]]:
    """Every :class:`Check` subclass defined in ``checks/tg*.py``, sorted by code; the folder is
    read once per process (every watcher asks: a callback's, inside the trainer's fit).

    Raises:
        RuntimeError: two checks claim the same code, or a check's code is not in the catalogue.
    """
    global _found
    if _found is None:
        _found = _discover()
    return list(_found)


def _discover() -> list[type[Check]]:
    from trainguard.catalog import CATALOG

    found: dict[str, type[Check]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("tg"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Check) and value is not Check
                    and value.__module__ == module.__name__):
                if value.code not in CATALOG:
                    raise RuntimeError(f"{module.__name__}: code {value.code!r} is not in the catalogue")
                if value.code in found:
                    raise RuntimeError(f"{value.code} is claimed by {found[value.code].__module__} "
                                       f"and {module.__name__}")
                found[value.code] = value
    return [found[c] for c in sorted(found)]
