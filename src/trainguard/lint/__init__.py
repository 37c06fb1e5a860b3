"""The linter: ``trainguard lint PATH`` finds silent PyTorch training bugs without running code.

It parses with :mod:`ast` and never imports torch, numpy or matplotlib, so it is fast enough for
pre-commit hooks and editors. One rule per catalogue code lives in :mod:`trainguard.lint.rules`.
Names load on first use so that ``trainguard --help`` imports only the CLI module.

Example::

    from trainguard.lint import lint_text
    findings = lint_text(open("train.py").read(), path="train.py")
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lint_text", "lint_source", "lint_paths"]
_EXPORTS = {"lint_text": "trainguard.lint.engine", "lint_source": "trainguard.lint.engine",
            "lint_paths": "trainguard.lint.runner"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trainguard.lint' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
