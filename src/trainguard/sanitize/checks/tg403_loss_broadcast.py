"""TG403 loss-broadcast: an elementwise loss whose input and target broadcast to a larger shape.

What it watches: every ``MSELoss``/``L1Loss``/``SmoothL1Loss``/``HuberLoss`` call and their
functional forms: the two shapes (no values, no sync).

When it fires: the shapes differ and broadcasting them gives more elements than either has
(``(N, 1)`` against ``(N,)`` gives ``(N, N)``): the loss averages every prediction against every
target; or the target has more values than the input and the input grows to it (``(N, 1)``
against ``(N, K)``: a TD target already broadcast to ``(N, N)`` by ``r + gamma * q_next``, or
built from a per-dimension log-probability). PyTorch only warns ("Using a target size ... that is different to the input size"), and the
warning is easy to miss in a log.

Also: a target of one row that is a view of a tensor with at least the batch's rows (``y[:1]``
against an ``(N, 1)`` prediction): every prediction is trained towards one sample's target.

Also: a prediction of one row against a target of N rows, made by a model call given N samples
(stamped with its inputs): the model folded its batch into one row (``x.view(-1, C * H * W)``
with a feature size larger than one sample's). The call is run again once per loss line
(``core/batch_fold.py``) and the finding is reported at the first op that turned the N rows into
one without changing the number of elements; at the loss line when none is found.

Silent on: equal shapes; a target that broadcasts into the input without growing it (a scalar
target, one target for every head of an ``(N, K)`` output, a constant ``(1, 1)`` target); ``BCELoss``/``BCEWithLogitsLoss``, which raise on a size mismatch themselves.

PyTorch's own error, explained: when ``BCELoss``/``BCEWithLogitsLoss`` (or their functional forms)
raise on such a mismatch ("Using a target size (torch.Size([64])) that is different to the input
size (torch.Size([64, 1]))", "Target size ... must be the same as input size ..."), the diagnosis
names the two shapes and which one to squeeze or unsqueeze. For ``(N, 1)`` against ``(N,)``
it is placed at the target's assignment when the loss's frame converted the target there from
other labels (``y = y_batch.float()``: ``core/target_shape.py``), the loss line in the message;
else at the loss line.

Cost: per checked loss call, a comparison of two shapes; at PyTorch's size error, its message;
once per loss line with a folded batch, one forward of the model with a Python call per op.

Reference: ``MSELoss`` docs (input and target of the same shape)
https://pytorch.org/docs/stable/generated/torch.nn.MSELoss.html; GitHub issue
https://github.com/deepset-ai/FARM/issues/229; a batch folded by ``View(-1)``:
https://github.com/karpathy/neuraltalk2/issues/90.
"""

from __future__ import annotations

import ast
import re
import sys
import weakref
from math import prod
from typing import Any

from trainguard.sanitize.core.batch_fold import batch_fold
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.frames import (frame_location, read_path, short_location,
                                             user_frame)
from trainguard.sanitize.core.graph import stamp_of
from trainguard.sanitize.core.target_chain import widened_at
from trainguard.sanitize.core.target_shape import error_frame, loss_args, shaped_at

_SIZE = r"torch\.Size\(\[([\d, ]*)\]\)"
# binary_cross_entropy / binary_cross_entropy_with_logits (torch/nn/functional.py)
_BCE_SIZES = (re.compile(rf"Using a target size \({_SIZE}\) that is different to the input size "
                         rf"\({_SIZE}\)"),
              re.compile(rf"Target size \({_SIZE}\) must be the same as input size \({_SIZE}\)"))
_BCE_FUNCS = ("binary_cross_entropy", "binary_cross_entropy_with_logits")
_NAMES = ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
          "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")


class LossBroadcast(Check):
    code = "TG403"
    stamps = "inputs"  # model outputs stamped, with the call's tensor arguments (a re-run)

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # loss line -> (model class, batch_fold's answer) or None: a one-row prediction's model
        self.folds: dict[Any, Any] = {}

    def on_loss(self, call: Any) -> None:
        if call.name not in _NAMES:
            return
        a, b = getattr(call.input, "shape", None), getattr(call.target, "shape", None)
        if a is None or b is None or a == b:
            return
        import torch

        try:
            both = torch.broadcast_shapes(a, b)
        except RuntimeError:
            return  # PyTorch raises its own error
        if prod(both) <= max(prod(a), prod(b)):
            base = getattr(call.target, "_base", None)
            if len(a) == len(b) and len(a) >= 1 and b[0] == 1 < a[0] and base is not None and \
                    len(base.shape) >= 1 and base.shape[0] >= a[0]:
                # one row sliced out of a target that has the whole batch (y[:1]): every
                # prediction is trained towards that one sample's target
                self.report(
                    f"{call.name} input {tuple(a)} and target {tuple(b)}: the target is one row "
                    f"sliced from a tensor of {base.shape[0]} rows (such as y[:1]), and it "
                    f"broadcasts to every prediction of the batch, so all {a[0]} are trained "
                    "towards the first sample's target",
                    fix="pass the whole target (same shape as the prediction), not a slice of it",
                    where=call.where)
                return
            if prod(both) > prod(a) and len(a) == len(b) >= 2 and a[0] == 1 < b[0] and \
                    a[1:] == b[1:] and self._folded(call, b[0]):
                return
            if prod(both) > prod(a):  # the target has more values per sample than the input
                square = len(b) == 2 and b[0] == b[1] > 1 and tuple(a) == (b[0], 1)
                widened = widened_at(call.where, user_frame(sys._getframe(1)), call.input,
                                     call.target)
                self.report(
                    f"{call.name} input {tuple(a)} and target {tuple(b)}: each prediction is "
                    f"compared with {prod(b) // max(prod(a), 1)} target values"
                    + (f"; the target is square in the batch ({b[0]} x {b[0]}), the result of an "
                       f"earlier broadcast of a ({b[0]},) tensor against a ({b[0]}, 1) one (a "
                       "reward plus a next-state value)" if square else
                       "; the target was built with a dimension the prediction does not have "
                       "(a per-dimension log-probability not summed, an unsqueeze missing)")
                    + ", so the loss trains towards their mean"
                    + (f"; `{widened[1]}` {tuple(b)} brings them into the target here (the loss "
                       f"at {short_location(call.where)})" if widened else ""),
                    fix="find where the target was built and give it the prediction's shape, "
                        "e.g. reward.unsqueeze(1) + gamma * next_q, or log_prob.sum(-1, "
                        "keepdim=True)",
                    where=widened[0] if widened else call.where)
            return
        self.report(
            f"{call.name} input {tuple(a)} and target {tuple(b)} broadcast to {tuple(both)}: the "
            f"loss compares every prediction with every target ({prod(both)} pairs instead of "
            f"{max(prod(a), prod(b))}), so it trains towards the mean target",
            fix="give input and target the same shape, e.g. output.squeeze(-1) or "
                "target.unsqueeze(-1)",
            where=call.where)

    def _folded(self, call: Any, batch: int) -> bool:
        """Report a one-row prediction made by a model given ``batch`` samples (its batch folded
        into one row), at the op that folded it when a re-run finds it; False when the model
        call is not known or was not given ``batch`` samples."""
        key = call.where[:2] if call.where is not None else None
        if key not in self.folds:
            self.folds[key] = self._find_fold(call.input, batch)
        fold = self.folds[key]
        if fold is None:
            return False
        module, op = fold
        said = f"; `{op[0]}` at {short_location(op[3])} turned {op[1]} into {op[2]}" \
            if op is not None and op[3] is not None else ""
        self.report(
            f"{call.name} input {tuple(call.input.shape)} and target {tuple(call.target.shape)}: "
            f"{module} was given {batch} samples and returned one row{said}, so the batch was "
            "folded into one row and the loss compares one prediction with every target",
            fix="flatten each sample, not the batch: x.flatten(1) or x.view(x.size(0), -1), and "
                "size the next layer for one sample's features",
            where=op[3] if op is not None and op[3] is not None else call.where)
        return True

    def _find_fold(self, prediction: Any, batch: int) -> tuple[str, Any] | None:
        """``(model class name, batch_fold's answer)`` when ``prediction`` is the output of a
        model call (stamped) whose first argument has ``batch`` rows; else None."""
        made = stamp_of(prediction) if getattr(prediction, "grad_fn", None) is not None else None
        ref = self.state.models._refs.get(made.model_id) if made is not None else None
        model = ref() if ref is not None else None
        args = [r() for r in made.inputs] if made is not None and made.inputs else None
        if model is None or not args or any(a is None for a in args) or \
                getattr(args[0], "shape", (0,))[:1] != (batch,):
            return None
        kwargs = {k: v() if isinstance(v, weakref.ref) else v
                  for k, v in (made.kwargs or {}).items()}
        if any(v is None and isinstance(made.kwargs[k], weakref.ref) for k, v in kwargs.items()):
            return None
        self.state.modules.append(model)  # inner calls of the re-run are not outermost forwards
        try:
            return type(model).__name__, batch_fold(model, args, kwargs, batch, 1)
        finally:
            self.state.modules.pop()

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        if not isinstance(exc, ValueError):
            return None
        for pattern in _BCE_SIZES:
            m = pattern.search(str(exc))
            if m:
                break
        else:
            return None
        target, given = _dims(m.group(1)), _dims(m.group(2))  # both messages: target first
        message = f"the binary cross-entropy loss got input {given} and target {target}: " \
            "PyTorch needs the same shape (an elementwise loss would otherwise compare every " \
            "prediction with every target)"
        converted = _converted_at(exc) if given == (*target, 1) or target == (*given, 1) \
            else None
        if converted is None:
            return Diagnosis(message, fix=_fix(given, target))
        made, loss_at, source = converted
        how = "target.unsqueeze(-1)" if given == (*target, 1) else "target.squeeze(-1)"
        return Diagnosis(
            message + f"; the target is converted from `{source}` here without the input's "
            f"shape (the loss at {short_location(loss_at)})",
            fix=f"give the target the input's shape where it is converted: `{how}` (or "
                "`.view_as(output)`)",
            where=made[:2])


def _converted_at(exc: BaseException) -> tuple[Any, Any, str] | None:
    """``(location, loss's user line, source name)`` of the assignment in the loss's frame that
    made the target by converting other labels there (``y = labels.float()``,
    ``y = y_batch.type(torch.FloatTensor)``: a method chain on a tensor of the frame), or None
    (a target made from scratch, ``torch.ones(n)``, or taken straight from the batch)."""
    args = loss_args(exc, _BCE_FUNCS)
    frame = error_frame(exc)
    shaped = shaped_at(frame, args[2]) if args is not None and frame is not None else None
    value = getattr(shaped[1], "value", None) if shaped is not None else None
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return None
    base = value.func.value
    while isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute):
        base = base.func.value
    if not isinstance(base, ast.Name) or \
            not hasattr(read_path(frame, base, global_names=True), "dim"):  # (``torch.ones``)
        return None
    return shaped[0], frame_location(frame), base.id


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split(",") if d.strip())


def _fix(given: tuple[int, ...], target: tuple[int, ...]) -> str:
    """How to make ``given`` (the input) and ``target`` the same shape."""
    if given == (*target, 1):
        return "squeeze the model's output with `output.squeeze(-1)` (or `target.unsqueeze(-1)`)"
    if target == (*given, 1):
        return "squeeze the target with `target.squeeze(-1)` (or `output.unsqueeze(-1)`)"
    if len(given) == len(target) + 1 and given[:-1] == target and given[-1] > 1:
        return (f"the input holds {given[-1]} values per sample and the target one: for one "
                f"label out of {given[-1]} classes use CrossEntropyLoss with integer class "
                "targets; for a binary label give the model one output and squeeze it")
    if prod(given) == prod(target):
        return "reshape the target with `target.view_as(output)`"
    return "give input and target the same shape"
