"""Names of evaluation data (``val_loader``, ``testdataloader``, ``X_val``, ``self.test_set``),
read by the linter and the watcher alike.

A name is split into words at underscores, digits and lower-to-upper case changes; it names
evaluation data when one word names a held-out split (``val``, ``valid``, ``test``, ``eval``,
...) and one names data (``loader``, ``data``, ``set``, ``x``, ...), or one word joins the two
(``testdataloader``, ``valset``). ``val_loss``, ``test_acc`` and ``interval`` do not.
"""

from __future__ import annotations

import ast
import re

__all__ = ["eval_data", "reads_eval_data"]

_SPLITS = ("validation", "valid", "val", "testing", "test", "evaluation", "eval", "holdout",
           "heldout")
_DATA = frozenset({"loader", "loaders", "dataloader", "dl", "data", "dataset", "set", "batch",
                   "batches", "iter", "iterator", "x", "inputs", "input", "images", "imgs",
                   "points", "samples", "features", "feats", "graphs", "sequences", "seqs",
                   "split", "stream", "src", "source"})
_WORDS = re.compile(r"[_\d]+|(?<=[a-z])(?=[A-Z])")


def eval_data(name: str) -> bool:
    words = [w.lower() for w in _WORDS.split(name) if w]
    if any(w in _SPLITS for w in words) and any(w in _DATA for w in words):
        return True
    return any(w.startswith(s) and w[len(s):] in _DATA for w in words for s in _SPLITS)


def reads_eval_data(node: ast.AST) -> bool:
    """Whether the code under ``node`` reads a name or attribute of evaluation data."""
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and eval_data(n.id)
               or isinstance(n, ast.Attribute) and eval_data(n.attr) for n in ast.walk(node))
