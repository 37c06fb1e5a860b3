"""The linter: ``trainguard lint PATH`` finds silent PyTorch training bugs without running code.

It parses with :mod:`ast` and never imports torch, numpy or matplotlib, so it is fast enough for
pre-commit hooks and editors. One rule per catalogue code lives in :mod:`trainguard.lint.rules`.

Example::

    from trainguard.lint import lint_text
    findings = lint_text(open("train.py").read(), path="train.py")
"""

from __future__ import annotations

from trainguard.lint.engine import lint_source, lint_text
from trainguard.lint.runner import lint_paths

__all__ = ["lint_text", "lint_source", "lint_paths"]
