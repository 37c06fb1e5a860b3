"""trainguard: a correct PyTorch training loop, a runtime sanitizer and a linter for silent bugs.

The public names are loaded on first use, so ``import trainguard`` (and ``trainguard lint``) does not
import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Finding": "trainguard.findings",
    "lint_text": "trainguard.lint",
    "fit": "trainguard.loop.fit",
    "init_distributed": "trainguard.loop.distributed",
    "History": "trainguard.loop.history",
    "Callback": "trainguard.loop.callbacks",
    "EarlyStopping": "trainguard.loop.callbacks",
    "evaluate": "trainguard.loop.fit",
    "TrainingInterrupted": "trainguard.loop.fit",
    "seed_everything": "trainguard.ckpt.seeding",
    "load_checkpoint": "trainguard.ckpt.checkpoint",
    "make_loader": "trainguard.data.loaders",
    "weights_sha256": "trainguard.ckpt.fingerprint",
    "explain": "trainguard.explain.explainer",
    "graph": "trainguard.explain.graph",
    "gradcheck": "trainguard.explain.gradcheck",
    "watch": "trainguard.sanitize.watcher",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trainguard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext trainguard`` in IPython/Jupyter: ``%%trainguard`` and ``%trainguard lint``
    (see :mod:`trainguard.notebook`)."""
    from trainguard.notebook import load_ipython_extension as load

    load(ipython)
