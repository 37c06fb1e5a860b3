"""TG206 data-attribute, at run time: two parameters made to share one storage.

What it watches: at a checked ``optimizer.step()`` (``on_step_pre``), the parameters the
stepping optimizer holds and those of every model seen, by storage address (``data_ptr()``, which
includes the offset; no value is read, so CUDA is not synchronized). A shared storage stays shared
until the next ``.data`` assignment, so for each optimizer it looks at most once per
:data:`EVERY` optimizer steps (every step during the first 8, then more and more seldom).

When it fires: two distinct parameter objects, at least one of them held by the stepping
optimizer, start at the same address of the same device. That is what ``p.data = q.data`` (or
``p.data = q``, or ``nn.Parameter(q)``) makes: ``.data`` assignment swaps ``p``'s storage for
``q``'s without autograd or the optimizer knowing, so every step on one parameter also writes the
other -- a target network that follows the online network on every step, a decoder "tied" to an
encoder whose shared weight receives both updates. The finding is placed on the ``.data``
assignment of the user's file that calls ``step()`` when that file has one (the one naming a
parameter's attribute, when it has several); else on the ``step()`` line.

Silent: weights tied by assigning the Parameter itself (``decoder.weight = encoder.weight``: one
object), copies (``p.data.copy_(q.data)``, ``load_state_dict``), views at other offsets of one
flat buffer (FSDP's ``use_orig_params``, cuDNN's flattened RNN weights), empty parameters.

Cost: when it looks, one ``data_ptr()`` per parameter of the stepping optimizer and of the
models seen (about 0.3 us each); at a finding, one parse of one source file (cached, bounded by
``bounds.SOURCE_CHARS``).

References: https://pytorch.org/docs/stable/notes/autograd.html (in-place correctness: ``.data``
is not tracked) and the 0.4 migration guide's advice to use ``.detach()``/``copy_`` instead of
``.data``.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import Location, user_location


EVERY = 16
"""At most this many optimizer steps (counted over all optimizers) between two looks at one
optimizer's parameters."""


class DataAttribute(Check):
    code = "TG206"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.reported: set[frozenset[int]] = set()  # pairs of id(param) already reported
        self.next_look: dict[int, int] = {}  # id(optimizer) -> State.step of its next look

    def on_step_pre(self, optimizer: Any) -> None:
        step = self.state.step
        if step < self.next_look.get(id(optimizer), 0):
            return
        self.next_look[id(optimizer)] = step + min(EVERY, 1 + step // 8)
        stepped = [p for g in optimizer.param_groups for p in g["params"]]
        held = {id(p) for p in stepped}
        by_place: dict[tuple[Any, int], Any] = {}
        for p in _unique(stepped, _model_parameters(self.state.models)):
            if p.numel() == 0 or p.device.type == "meta":
                continue
            place = (p.device, p.data_ptr())
            other = by_place.setdefault(place, p)
            if other is p or (id(p) not in held and id(other) not in held):
                continue
            pair = frozenset((id(p), id(other)))
            if pair not in self.reported:
                self.reported.add(pair)
                self._report(other, p, _names(list(self.state.models)), held, optimizer)

    def _report(self, a: Any, b: Any, names: dict[int, tuple[str, str, int]], held: set[int],
                optimizer: Any) -> None:
        if id(a) not in held:
            a, b = b, a  # the parameter the optimizer steps first
        first, second = _name(names.get(id(a))), _name(names.get(id(b)), names.get(id(a)))
        held_too = " (which it also holds)" if id(b) in held else ""
        where = _data_assignment(user_location(sys._getframe(1)), (first, second))
        self.report(
            f"{first} {tuple(a.shape)}, which {type(optimizer).__name__} updates, shares one "
            f"storage with {second} {tuple(b.shape)}{held_too}: a `.data` assignment (or "
            "nn.Parameter(other)) made them one tensor, so every step also writes the other, "
            "behind autograd's back",
            fix="copy the values instead (`p.data.copy_(q.data)`, or `p.copy_(q)` under "
                "torch.no_grad(), or load_state_dict); to tie weights on purpose, assign the "
                "Parameter itself (`b.weight = a.weight`)",
            where=where)


def _model_parameters(models: Any) -> list[Any]:
    """The parameters registered on ``models`` and their submodules (read from each module's
    ``_parameters``: ``model.parameters()`` without its generators, duplicates kept)."""
    return [p for model in models for module in model.modules()
            for p in module._parameters.values() if p is not None]


def _unique(*groups: list[Any]) -> list[Any]:
    seen: set[int] = set()
    out = []
    for group in groups:
        for p in group:
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def _names(models: list[Any]) -> dict[int, tuple[str, str, int]]:
    """``id(param) -> (model class, parameter name, id(model))`` for the parameters of
    ``models``."""
    out: dict[int, tuple[str, str, int]] = {}
    for model in models:
        for name, p in model.named_parameters():
            out.setdefault(id(p), (type(model).__name__, name, id(model)))
    return out


def _name(known: tuple[str, str, int] | None, beside: tuple[str, str, int] | None = None) -> str:
    """``"QNet's fc.weight"``; ``"another QNet's fc.weight"`` when ``beside`` is the same
    parameter name of another model of the same class."""
    if known is None:
        return "a parameter of no model seen"
    cls, name, model = known
    other = beside is not None and beside[0] == cls and beside[2] != model
    return f"{'another ' if other else ''}{cls}'s {name}"


def _data_assignment(step_at: Location | None, names: tuple[str, str]) -> Location | None:
    """The ``x.data = ...`` statement of the file that calls ``step()`` (of several, the first
    whose target names a parameter's attribute, e.g. ``weight``), else ``step_at``."""
    if step_at is None:
        return None
    tree = parse_file(step_at[0])
    if tree is None:
        return step_at
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and any(isinstance(t, ast.Attribute) and t.attr == "data" for t in n.targets)]
    if len(found) > 1:
        leaves = {n.rsplit(".", 1)[-1] for n in names}  # "weight" of "QNet's fc.weight"
        named = [n for n in found if any(leaf in ast.unparse(n.targets[0]) for leaf in leaves)]
        found = named or found
    if not found:
        return step_at
    node = min(found, key=lambda n: n.lineno)
    return (step_at[0], node.lineno, node.col_offset + 1)
