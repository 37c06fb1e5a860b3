"""Names of evaluation data (``val_loader``, ``testdataloader``, ``X_val``, ``self.test_set``),
read by the linter and the watcher alike.

A name is split into words at underscores, digits and lower-to-upper case changes; it names
evaluation data when one word names a held-out split (``val``, ``valid``, ``test``, ``eval``,
...) and one names data (``loader``, ``data``, ``set``, ``x``, ...), or one word joins the two
(``testdataloader``, ``valset``). A sequence model's inputs (``valid_src``,
IBM/pytorch-seq2seq#33) are data too. ``val_loss``, ``test_acc`` and ``interval`` do not.
Indices of a held-out split (``val_idx``, ``test_indices``) are told apart by
:func:`eval_index`: they select evaluation rows out of a tensor that holds every split.
"""

from __future__ import annotations

import ast
import re

__all__ = ["eval_data", "eval_index", "reads_eval_data"]

_SPLITS = ("validation", "valid", "val", "testing", "test", "evaluation", "eval", "holdout",
           "heldout")
_DATA = frozenset({"loader", "loaders", "dataloader", "dl", "data", "dataset", "set", "batch",
                   "batches", "iter", "iterator", "x", "inputs", "input", "images", "imgs",
                   "points", "samples", "features", "feats", "graphs", "sequences", "seqs",
                   "split", "stream", "src", "source", "sources"})
_INDEX = frozenset({"idx", "idxs", "index", "indices", "ind", "inds", "ids", "rows"})
_WORDS = re.compile(r"[_\d]+|(?<=[a-z])(?=[A-Z])")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.split(name) if w]


def eval_data(name: str) -> bool:
    words = _words(name)
    if any(w in _SPLITS for w in words) and any(w in _DATA for w in words):
        return True
    return any(w.startswith(s) and w[len(s):] in _DATA for w in words for s in _SPLITS)


def eval_index(name: str) -> bool:
    """``val_idx``, ``test_indices``, ``validIdx``: a held-out split word and an index word."""
    words = _words(name)
    return any(w in _SPLITS for w in words) and any(w in _INDEX for w in words)


def reads_eval_data(node: ast.AST) -> bool:
    """Whether the code under ``node`` reads a name or attribute of evaluation data."""
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and eval_data(n.id)
               or isinstance(n, ast.Attribute) and eval_data(n.attr) for n in ast.walk(node))
