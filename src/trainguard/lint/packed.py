"""Packed sequences: a recurrent layer (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) handed a
``PackedSequence`` returns one, and its ``.data`` field is the packed values with their history,
not ``Tensor.data`` ("A Tensor can be retrieved from a PackedSequence object by accessing its
.data attribute": https://pytorch.org/docs/stable/generated/torch.nn.utils.rnn.pack_padded_sequence.html).
A file that packs sequences anywhere (in ``forward``, a collate function, the training loop) is
taken to feed its recurrent layers packed input.
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import walk_local
from trainguard.lint.script import Script

__all__ = ["packs_sequences", "recurrent_submodules", "recurrent_outputs", "rnn_output"]

_RECURRENT = ("LSTM", "GRU", "RNN")


def packs_sequences(script: Script) -> bool:
    """The file calls ``pack_sequence``/``pack_padded_sequence`` somewhere."""
    return any((script.call_qualname(n) or "").startswith("torch.nn.utils.rnn.pack")
               for n in script.calls)


def recurrent_submodules(script: Script, init: ast.FunctionDef) -> set[str]:
    """The ``self.x = nn.LSTM(...)`` (GRU, RNN) attributes ``__init__`` sets."""
    return {a for n in walk_local(init) if isinstance(n, ast.Assign) and
            isinstance(n.value, ast.Call) and
            (script.call_qualname(n.value) or "").startswith("torch.nn.") and
            (script.call_qualname(n.value) or "").rsplit(".", 1)[-1] in _RECURRENT
            for a in map(self_attr, n.targets) if a}


def recurrent_outputs(func: ast.FunctionDef, recurrent: set[str]) -> set[str]:
    """Names bound only to a recurrent submodule's output in ``func``: ``out`` in
    ``out, h = self.lstm(x)`` or ``out = self.gru(x)[0]``, never rebound otherwise."""
    out, other = set(), set()
    for n in walk_local(func):
        bound = [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For,
                                              ast.NamedExpr)) else \
            [i.optional_vars for i in n.items if i.optional_vars] \
            if isinstance(n, ast.With) else []
        other.update(x.id for b in bound for x in ast.walk(b) if isinstance(x, ast.Name))
        if not isinstance(n, ast.Assign):
            continue
        t, v = n.targets[0], n.value
        if isinstance(v, ast.Subscript) and _first_item(v):
            v, t = v.value, ast.Tuple([t], ast.Store())
        if len(n.targets) == 1 and isinstance(v, ast.Call) and \
                self_attr(v.func) in recurrent and isinstance(t, (ast.Tuple, ast.List)) and \
                t.elts and isinstance(t.elts[0], ast.Name):
            out.add(t.elts[0].id)
            other.update(x.id for e in t.elts[1:] for x in ast.walk(e)
                         if isinstance(x, ast.Name))
        else:
            other.update(x.id for tt in n.targets for x in ast.walk(tt)
                         if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store))
    return out - other


def _first_item(sub: ast.Subscript) -> bool:
    return isinstance(sub.slice, ast.Constant) and sub.slice.value == 0


def rnn_output(value: ast.AST, names: set[str], recurrent: set[str]) -> bool:
    """``value`` is ``out`` of ``out, h = self.lstm(x)`` (``names``), or ``self.lstm(x)[0]``."""
    if isinstance(value, ast.Name):
        return value.id in names
    return isinstance(value, ast.Subscript) and _first_item(value) and \
        isinstance(value.value, ast.Call) and self_attr(value.value.func) in recurrent


def self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "self":
        return node.attr
    return None
