"""TG206 data-attribute, at run time: parameters whose storage ``.data`` assignment swaps.

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

It also fires when a parameter the stepping optimizer holds has its storage swapped again and
again between looks (seen at two looks at least: ``model.to(device)`` swaps once), the swap
changed at least 10% of the values the optimizer had just made (compared once, from a copy taken
after one step: a clamp that leaves them alone is silent), and the module
registering it assigns ``self.<name>.data = ...`` in its own ``forward``, or a module enclosing it
``self.<child>.<name>.data = ...`` in its ``forward`` (or in a method of the class that
``forward`` calls on ``self``): a weight quantized, binarized or normalized in place of
the latent one, so each forward overwrites what the optimizer just updated (small updates are
lost) and the gradient is taken at the replacement. That finding is placed on the assignment.

Silent: weights tied by assigning the Parameter itself (``decoder.weight = encoder.weight``: one
object), copies (``p.data.copy_(q.data)``, ``load_state_dict``), views at other offsets of one
flat buffer (FSDP's ``use_orig_params``, cuDNN's flattened RNN weights), empty parameters;
storage swaps made outside the module's forward (a projection after the step, manual SGD through
``p.data = p.data - lr * p.grad``, a library's own swaps).

Cost: when it looks, one ``data_ptr()`` per parameter of the stepping optimizer and of the
models seen (about 0.3 us each); at a finding, one parse of one source file (cached, bounded by
``bounds.SOURCE_CHARS``); once a parameter's storage was swapped, one copy of its values after a
step and one comparison (4 million values at most in all).

References: https://pytorch.org/docs/stable/notes/autograd.html (in-place correctness: ``.data``
is not tracked) and the 0.4 migration guide's advice to use ``.detach()``/``copy_`` instead of
``.data``; eladhoffer/quantized.pytorch#12 and ZLkanyo009/STBP-train-and-compression#1 (weights
quantized in place lose the optimizer's small updates).
"""

from __future__ import annotations

import ast
import sys
from typing import Any, Iterator

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import Location, is_user_file, user_location
from trainguard.sanitize.core.values import as_float, readable


EVERY = 16
"""At most this many optimizer steps (counted over all optimizers) between two looks at one
optimizer's parameters."""


_CHANGED = 0.1  # share of a parameter's values the forward's `.data` write must change
_CLONED = 4_000_000  # values copied at most (parameters whose storage a forward swaps)


class DataAttribute(Check):
    code = "TG206"
    on_demand = ("on_step",)  # only while a swapped parameter's stepped values are wanted

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.reported: set[frozenset[int]] = set()  # pairs of id(param) already reported
        self.next_look: dict[int, int] = {}  # id(optimizer) -> State.step of its next look
        self.ptrs: dict[int, int] = {}  # id(param) -> its data_ptr() at the previous look
        self.swaps: dict[int, int] = {}  # id(param) -> looks that saw its storage swapped
        self.placed: set[Location] = set()  # `.data` assignments in a forward already reported
        self.want: list[Any] = []  # swapped parameters whose values to copy after this step
        self.stepped: dict[int, Any] = {}  # id(param) -> its values right after a step
        self.changed: dict[int, float] = {}  # id(param) -> share of them the next forward changed

    def on_step_pre(self, optimizer: Any) -> None:
        step = self.state.step
        if step < self.next_look.get(id(optimizer), 0):
            return
        self.next_look[id(optimizer)] = step + min(EVERY, 1 + step // 8)
        stepped = [p for g in optimizer.param_groups for p in g["params"]]
        held = {id(p) for p in stepped}
        by_place: dict[tuple[Any, int], Any] = {}
        swapped: set[int] = set()
        for p in _unique(stepped, _model_parameters(self.state.models)):
            if p.numel() == 0 or p.device.type == "meta":
                continue
            place = (p.device, p.data_ptr())
            if id(p) in held and self._swapped(p, place[1]):
                swapped.add(id(p))
            other = by_place.setdefault(place, p)
            if other is p or (id(p) not in held and id(other) not in held):
                continue
            pair = frozenset((id(p), id(other)))
            if pair not in self.reported:
                self.reported.add(pair)
                self._report(other, p, _names(list(self.state.models)), held, optimizer)
        if self.want:
            self.next_look[id(optimizer)] = step + 1  # the values after this step, next forward
            self.arm()
        if swapped:
            self._replaced_in_forward(swapped, optimizer)

    def on_step(self, optimizer: Any) -> None:
        want, self.want = self.want, []
        for p in want:
            self.stepped[id(p)] = p.detach().clone()
        self.disarm()

    def _swapped(self, p: Any, ptr: int) -> bool:
        """Whether ``p``'s storage was swapped (``p.data = ...``) between this look and the
        previous one, for the second time at least, and that write changed the values the
        optimizer had just made (an optimizer's own update is in place, a one-off move such as
        ``model.to(device)`` swaps once, a clamp that leaves the values alone changes nothing)."""
        before = self.ptrs.get(id(p))
        self.ptrs[id(p)] = ptr
        if before is None or before == ptr:
            return False
        self.swaps[id(p)] = self.swaps.get(id(p), 0) + 1
        stepped = self.stepped.pop(id(p), None)
        if stepped is not None and stepped.shape == p.shape:
            changed = as_float((stepped != p.detach()).float().mean())  # (a rare path: a sync)
            self.changed[id(p)] = 0.0 if changed is None else changed
        elif id(p) not in self.changed and readable(p) and \
                sum(t.numel() for t in self.stepped.values()) + p.numel() <= _CLONED:
            self.want.append(p)
        return self.swaps[id(p)] >= 2 and self.changed.get(id(p), 0.0) >= _CHANGED

    def _replaced_in_forward(self, swapped: set[int], optimizer: Any) -> None:
        """Report a parameter whose storage its own module's ``forward`` replaces through
        ``.data`` at every call (a weight quantized or normalized in place of the latent one)."""
        for where, param, module in _forward_data_assignments(list(self.state.models), swapped):
            if where not in self.placed:
                self.placed.add(where)
                self._report_replaced(where, param, module, optimizer)

    def _report_replaced(self, where: Location, param: str, module: str, optimizer: Any) -> None:
        self.report(
            f"{param}, which {type(optimizer).__name__} updates, is replaced through `.data` in "
            f"{module}.forward at every call: each forward overwrites the value the optimizer "
            "just updated, behind autograd's back (small updates are lost, and the gradient is "
            "taken as if the replacement were the parameter)",
            fix="compute the transformed weight as a new tensor in forward and leave the "
                "parameter to the optimizer (`w = quantize(self.weight)`; to pass gradients "
                "through a rounding, `w = self.weight + (quantize(self.weight) - "
                "self.weight).detach()`)",
            where=where)

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


def _forward_data_assignments(models: list[Any], ids: set[int]
                              ) -> Iterator[tuple[Location, str, str]]:
    """``(location, "Model's conv1.weight", "QConv2d")`` of each ``self.<name>.data = ...``
    statement in the user-defined ``forward`` of a module registering a parameter of ``ids`` (or
    in a method of its class that ``forward`` calls as ``self.method(...)``); none when the swap
    is made elsewhere (a projection after the step, a library)."""
    for model in models:
        for prefix, module in model.named_modules():
            for name, p in module._parameters.items():
                if p is None or id(p) not in ids:
                    continue
                qualified = f"{prefix}.{name}" if prefix else name
                # the module's own forward (`self.weight.data = ...`), else an enclosing one's
                # (`self.fc1.weight.data = ...` in the model's forward)
                path = qualified.split(".")
                for depth in range(len(path) - 1, -1, -1):
                    owner = model.get_submodule(".".join(path[:depth]))
                    where = _data_assigned_in_forward(type(owner), path[depth:])
                    if where is not None:
                        yield where, f"{type(model).__name__}'s {qualified}", type(owner).__name__
                        break


def _data_assigned_in_forward(cls: type, path: list[str]) -> Location | None:
    """The first ``self.<path>.data = ...`` (``path``: attribute names, ``["fc1", "weight"]``)
    of ``cls``'s ``forward`` (a user file's) or of the methods of its class that it calls on
    ``self``."""
    forward = next((k.__dict__["forward"] for k in cls.__mro__ if "forward" in k.__dict__), None)
    code = getattr(forward, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    tree = parse_file(code.co_filename)
    if tree is None:
        return None
    for klass in ast.walk(tree):
        if not isinstance(klass, ast.ClassDef):
            continue
        methods = {f.name: f for f in klass.body if isinstance(f, ast.FunctionDef)}
        body = methods.get("forward")
        if body is None or code.co_firstlineno not in _first_lines(body):
            continue
        called = [methods[c.func.attr] for c in ast.walk(body) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute) and c.func.attr in methods
                  and isinstance(c.func.value, ast.Name) and c.func.value.id == "self"]
        for function in (body, *called):
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and any(_is_data_of(t, path) for t in node.targets):
                    return (code.co_filename, node.lineno, node.col_offset + 1)
    return None


def _first_lines(function: ast.FunctionDef) -> set[int]:
    """The lines a function's code object may start at (its ``def`` or its first decorator)."""
    return {function.lineno, *(d.lineno for d in function.decorator_list)}


def _is_data_of(target: ast.expr, path: list[str]) -> bool:
    """``self.<path>.data`` (``self.fc1.weight.data`` for ``["fc1", "weight"]``)."""
    if not (isinstance(target, ast.Attribute) and target.attr == "data"):
        return False
    node = target.value
    for attr in reversed(path):
        if not (isinstance(node, ast.Attribute) and node.attr == attr):
            return False
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"
