"""TG402 label-dtype: class targets of the wrong form.

What it watches: the first call of each loss line (later calls of the same line cost one dict
look-up): for ``CrossEntropyLoss``/``F.cross_entropy`` with float targets of the input's shape
(class probabilities), and for ``BCELoss``/``BCEWithLogitsLoss`` and their functional forms, the
target's range. That look reads the values once per line (a sync on CUDA, once). When the run dies
of a loss error, the loss function's own arguments (found in the traceback) are read.

When it fires:
- float class probabilities that are not probabilities: negative, above 1, or rows not summing to 1
  (e.g. regression values or unnormalized scores passed as soft targets);
- binary targets outside [0, 1] (``-1/+1`` labels, class indices 0..K given to a binary loss);
- and it explains PyTorch's errors: float class indices ("expected target dtype to be Long"),
  a class index out of range ("Target 7 is out of bounds", with the number of classes),
  one-hot integer targets ("0D or 1D target tensor expected"; an ``(N, 1)`` column of class
  indices is placed at the assignment the loss's target comes from when no dataset or stored
  labels are found: ``core/target_shape.py``), integer targets for a binary loss ("result type
  Float can't be cast to the desired output type Long").

Where: at the dataset line (or the line of a batch generator of the user's) that made the targets
when the loss call's frames show it (``core/target_origin.py``), or at the assignment of labels
stored before the loop that the loss takes them from (``y_train[idx]``: ``core/stored_target.py``),
the loss line in the message; else at the loss line. An error the script catches is placed so too,
from the frame that called the loss (on the stack as it fails); caught, logged and raised again,
so too. A class index out of range names the labels' fault when they are all in 1..C (counted from
1), only 0 and 255 (a mask's grey levels), or, in a dense target (a mask), exactly C distinct
values (ids never mapped to class indices); any other may be a model with too few outputs: placed
where the model's width was set when the dataset's own ``classes`` list holds every label
(``core/head_width.py``), else where the targets were made, with both fixes (skeleton-dml#10).

Silent on: integer class indices in range (``ignore_index`` included), one-hot or label-smoothed
float probabilities, binary targets in [0, 1] (soft labels included).

Cost: per loss line, once: the targets' minimum, maximum and row sums (values read on CPU and CUDA
only: ``values.py``); at PyTorch's error, the failing call's arguments.

Reference: ``CrossEntropyLoss`` docs (target: class indices in [0, C) or class probabilities)
https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html; GitHub issue
https://github.com/qubvel-org/segmentation_models.pytorch/issues/197.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from trainguard.sanitize.core.caught import Caught
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.frames import frame_location, short_location, user_frame
from trainguard.sanitize.core.head_width import declared_classes, head_set_at
from trainguard.sanitize.core.stored_target import stored_origin
from trainguard.sanitize.core.target_origin import target_origin
from trainguard.sanitize.core.target_shape import error_frame, loss_args, shaped_at
from trainguard.sanitize.core.values import readable

_CE = ("CrossEntropyLoss", "cross_entropy")
_BINARY = ("BCELoss", "BCEWithLogitsLoss", "binary_cross_entropy", "binary_cross_entropy_with_logits")
_LOSS_FUNCS = ("cross_entropy", "nll_loss", "binary_cross_entropy",
               "binary_cross_entropy_with_logits")
_OUT_OF_BOUNDS = re.compile(r"Target (-?\d+) is out of bounds")
_DENSE = 64  # target values per class for its distinct values to show every kind of label


class LabelDtype(Check):
    code = "TG402"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.seen: set[Any] = set()
        # (diagnosis, user line, first line of the error) of errors of a loss call that the
        # script may catch
        self.caught = Caught(8)

    def on_loss(self, call: Any) -> None:
        name = call.name
        if name not in _CE and name not in _BINARY:
            return
        key = (call.where, name)
        if key in self.seen:
            return
        self.seen.add(key)
        x, t = call.input, call.target
        if not hasattr(t, "is_floating_point") or not hasattr(x, "shape"):
            return
        if not readable(t):
            return  # targets whose values cannot be read (meta)
        import torch

        with torch.no_grad():
            if name in _CE and t.is_floating_point() and t.shape == x.shape and x.dim() >= 2:
                lo, hi = float(t.min()), float(t.max())
                sums = t.sum(dim=1, dtype=torch.float32)
                row_lo, row_hi = float(sums.min()), float(sums.max())
                # (probabilities computed in bfloat16, a teacher's softmax under autocast, sum to
                # 1 only within its rounding, 2**-8 per value, also once cast to float32: values
                # that bfloat16 holds exactly get a tolerance of its machine epsilon)
                low = torch.bfloat16
                tol = torch.finfo(low).eps if t.dtype == low or bool((t.to(low) == t).all()) \
                    else 1e-3
                if lo < 0 or hi > 1 or max(abs(row_lo - 1), abs(row_hi - 1)) > tol:
                    multi_hot = lo == 0 and hi == 1 and row_hi > 1 \
                        and bool(((t == 0) | (t == 1)).all())
                    self.report(
                        f"{name} got float targets of the input's shape {tuple(x.shape)}, which it "
                        f"reads as class probabilities (each row summing to 1), but they are not: "
                        f"values in [{lo:.3g}, {hi:.3g}], row sums from {row_lo:.3g} to "
                        f"{row_hi:.3g}" + ("; rows with several 1s are multi-label targets"
                                           if multi_hot else ""),
                        fix=("for multi-label targets use BCEWithLogitsLoss on the logits; for "
                             "one class per sample pass class indices (a long tensor of shape (N,))"
                             if multi_hot else
                             "pass class indices (a long tensor of shape (N,)), or normalize the "
                             "soft targets (e.g. softmax over dim 1)"),
                        where=self._made(t, call.where), used_at=call.where)
            elif name in _BINARY and t.is_floating_point() and t.numel():
                lo, hi = float(t.min()), float(t.max())
                if lo < 0 or hi > 1:
                    self.report(
                        f"{name} targets lie in [{lo:.3g}, {hi:.3g}], outside [0, 1]: a binary "
                        "loss reads them as probabilities of the positive class, so -1/+1 labels "
                        "or class indices are trained towards nonsense",
                        fix="map the labels to 0/1 (e.g. (y > 0).float()), or use CrossEntropyLoss "
                            "for class indices",
                        where=self._made(t, call.where), used_at=call.where)

    def _made(self, target: Any, used_at: Any) -> Any:
        """The dataset line that made ``target`` (``core/target_origin.py``), else ``used_at``."""
        frame, passes = user_frame(sys._getframe(2)), self.state.loader_passes
        return target_origin(frame, target, passes) or stored_origin(frame, target, passes) \
            or used_at

    def report(self, message: str, *, fix: str | None = None, where: Any = None,
               used_at: Any = None, **extra: Any) -> Any:
        if used_at is not None and where is not None and where[:2] != used_at[:2]:
            message += _made_here(used_at)
        return super().report(message, fix=fix, where=where, **extra)

    def on_forward_failed(self, module: Any, exc: BaseException, where: Any) -> None:
        if not self.caught.full and self.caught.get(exc) is None:
            found = self._explain(exc)
            if found is not None:
                self.caught.hold(exc, (found, where, str(exc).splitlines()[0][:120]))

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        held = self.caught.claim(exc)  # the run dies of it: explained there (whole traceback)
        found = self._explain(exc)
        if held is not None and held[0].where is not None and (found is None or not found.where):
            # caught, then raised again (logged first): the user frame has left the loss line
            # since the error left the loss, where the held diagnosis found the targets' origin
            return held[0]
        return found

    def on_exit(self) -> None:
        """Label errors the script caught: the run went on (or stopped) without that loss."""
        for found, where, text in self.caught.drain():
            self.report(f"{found.message}; the loss raised `{text}` and the script caught the "
                        f"error", fix=found.fix, where=found.where or where)

    def _column(self, exc: BaseException, func: str, target: Any, shapes: str) -> Diagnosis:
        """The diagnosis of class indices given as an ``(N, 1)`` column: placed where the
        targets were made (a dataset's line, labels stored before the loop, or the assignment
        the loss takes them from), the loss line in the message."""
        made, used = _made_at_error(exc, target, self.state.loader_passes)
        if made is None:
            frame = error_frame(exc)
            shaped = shaped_at(frame, target)
            made, used = (shaped[0], frame_location(frame)) if shaped else (None, None)
        return Diagnosis(
            f"{func} got class indices as a column of shape {_shape(target)} ({shapes}): it "
            "needs one index per sample, shape (N,), and reads a 2-D integer target as several "
            "indices per sample" + (_made_here(used) if made is not None else ""),
            fix="drop the column dimension where the targets are made (`y.squeeze(1)`, or "
                "`table[:, -1]` instead of `table[:, -1:]`)",
            where=made[:2] if made is not None else None)

    def _explain(self, exc: BaseException) -> Diagnosis | None:
        text = str(exc)
        args = loss_args(exc, _LOSS_FUNCS)
        if args is None:
            return None
        func, x, t = args
        shapes = f"input {_shape(x)} {_dtype(x)}, target {_shape(t)} {_dtype(t)}"
        m = _OUT_OF_BOUNDS.search(text)
        if m:
            classes = x.shape[1] if getattr(x, "dim", lambda: 0)() >= 2 else None
            span = f"[0, {classes - 1}]" if classes else "the class range"
            message = f"{func} got class index {m.group(1)}, but the input has " \
                f"{classes if classes else 'fewer'} classes ({shapes}); valid targets lie in {span}"
            form = _label_form(t, classes, _ignore_index(exc)) if classes else ""
            head = _head_too_small(exc, t, classes, message) \
                if classes and (not form or form.startswith("ids")) else None
            if head is not None:
                return head
            if form.startswith("ids"):
                return _label_ids(exc, t, classes, form, message, self.state.loader_passes)
            if not form:  # (placed where the labels were bound when that is found)
                made, used = _made_at_error(exc, t, self.state.loader_passes)
                return Diagnosis(
                    message + (_made_here(used) if made is not None and used is not None else ""),
                    fix="make the model's last layer output one score per class, or remap the "
                        "labels to 0..C-1 (labels starting at 1 need `y - 1`)",
                    where=made[:2] if made is not None else None)
            # labels 1..C, or a 0/255 mask, for C scores: the labels are what to change
            made, used = _made_at_error(exc, t, self.state.loader_passes)
            fix = "subtract 1 where the labels are made (`int(label) - 1`)" if form == "one" \
                else "map the mask's values to class indices where it is read (`mask == 255`)"
            return Diagnosis(
                message + ("; these labels run from 1 to {classes}: counted from 1, not 0"
                           if form == "one" else "; the targets hold only 0 and 255: a mask "
                           "image's grey levels, not class indices").format(classes=classes)
                + (_made_here(used) if made is not None and used is not None else ""),
                fix=fix + f", so that they run from 0 to {classes - 1}",
                where=made[:2] if made is not None else None)
        if "expected target dtype to be Long" in text or "expected scalar type Long" in text:
            made, used = _made_at_error(exc, t, self.state.loader_passes)
            return Diagnosis(
                f"{func} got class indices stored as floats ({shapes})"
                + (_made_here(used) if made is not None and used is not None else ""),
                fix="convert the targets with `.long()` (class indices), or pass float class "
                    "probabilities of the input's shape",
                where=made[:2] if made is not None else None)
        if "Expected floating point type for target with class probabilities" in text:
            return Diagnosis(
                f"{func} got integer targets of the input's shape ({shapes}): a target shaped "
                "like the input is read as class probabilities, which must be floats; these "
                "look like one-hot labels kept as integers",
                fix="pass class indices, `y.argmax(dim=1)`, or `y.float()` as class "
                    "probabilities")
        if "0D or 1D target tensor expected" in text and _column(x, t):
            return self._column(exc, func, t, shapes)
        if "0D or 1D target tensor expected" in text:
            return Diagnosis(
                f"{func} got integer targets of shape {_shape(t)}: one-hot labels are read as "
                f"several class indices per sample ({shapes})",
                fix="pass `y.argmax(dim=1)` (class indices), or `y.float()` as class probabilities")
        if "can't be cast to the desired output type" in text and func.startswith("binary"):
            return Diagnosis(
                f"{func} got integer targets ({shapes}); binary losses need float targets",
                fix="convert the targets with `.float()` (0.0/1.0)")
        return None


def _head_too_small(exc: BaseException, target: Any, classes: int,
                    message: str) -> Diagnosis | None:
    """The diagnosis of labels out of range for a model with too few outputs: the dataset
    declares more classes than its ``classes`` scores, and every label lies inside them
    (``core/head_width.py``); placed where the model's width was set when that is found."""
    frame = error_frame(exc)
    declared = declared_classes(frame) if frame is not None else None
    if declared is None or declared <= classes or not readable(target) or \
            target.is_floating_point() or target.numel() == 0 or \
            not 0 <= int(target.min()) <= int(target.max()) < declared:
        return None
    at = head_set_at(frame, classes)
    loss_at = short_location(frame_location(frame))
    note = f" (the number of outputs is set here; the loss at {loss_at})"
    return Diagnosis(
        message + f"; the dataset declares {declared} classes (its `classes`) and every label "
        f"lies among them: the model has too few outputs" + (note if at is not None else ""),
        fix=f"give the model's last layer one output per class of the dataset ({declared}, "
            "e.g. `len(dataset.classes)`)",
        where=at[:2] if at is not None else None)


def _column(given: Any, target: Any) -> bool:
    """Whether ``target`` holds one class index per sample as an ``(N, 1)`` column for scores
    ``given`` of shape ``(N, C)``: the target, not the input, differs from what the loss needs."""
    shape, scores = getattr(target, "shape", ()), getattr(given, "shape", ())
    return len(shape) == 2 and shape[1] == 1 and len(scores) == 2 and scores[0] == shape[0] \
        and scores[1] > 1


def _made_at_error(exc: BaseException, target: Any, passes: Any) -> tuple[Any, Any]:
    """``(dataset line that made target, the loss's user line)`` from the failing traceback's
    innermost user frame (``core/target_origin.py``); ``(None, None)`` when not found."""
    frame = error_frame(exc)
    if frame is None:  # (not yet through the user's code: explained again when it is)
        return None, None
    made = target_origin(frame, target, passes) or stored_origin(frame, target, passes)
    return (made, frame_location(frame)) if made is not None else (None, None)


def _made_here(loss_at: Any) -> str:
    """The note a finding placed at the line that made the targets (a dataset's, a batch
    generator's) carries: where the loss is."""
    return f" (the targets are made here; the loss at {short_location(loss_at)})"


def _label_form(target: Any, classes: int, ignore: int | None = None) -> str:
    """How out-of-range integer class indices were written, where the labels (not the model's
    ``classes`` scores) are what is wrong: ``"one"`` when they all lie in 1..``classes`` (counted
    from 1), ``"255"`` when they hold only 0 and 255 (a mask's grey levels), ``"ids ..."`` (the
    values) when a dense target (at least 64 values per class) holds, ``ignore`` aside, exactly
    ``classes`` distinct values, not 0..``classes``-1 (an annotation tool's ids, never mapped to
    class indices: as many kinds of label as scores), else ``""``. Values read on CPU and CUDA
    only (a sync, at the error)."""
    if not readable(target) or target.is_floating_point() or target.numel() == 0:
        return ""
    low, high = int(target.min()), int(target.max())
    if low >= 1 and high <= classes:
        return "one"
    if low == 0 and high == 255 and classes < 255 and \
            bool(((target == 0) | (target == 255)).all()):
        return "255"
    if target.numel() >= _DENSE * classes:
        values = [int(v) for v in target.unique(sorted=True)[:classes + 2] if int(v) != ignore]
        if len(values) == classes and values[0] >= 0 and values[-1] >= classes:
            return "ids " + " ".join(map(str, values))
    return ""


def _ignore_index(exc: BaseException) -> int | None:
    """The ``ignore_index`` of the loss function the exception passed through, or None."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_name in _LOSS_FUNCS:
            value = tb.tb_frame.f_locals.get("ignore_index")
            found = value if isinstance(value, int) else found
        tb = tb.tb_next
    return found


def _label_ids(exc: BaseException, target: Any, classes: int, form: str, message: str,
               passes: Any) -> Diagnosis:
    """The diagnosis of label ids for ``classes`` scores: as many distinct values as classes,
    not 0..C-1; placed where the labels are made when that is found."""
    values = form.split()[1:]
    made, used = _made_at_error(exc, target, passes)
    mapping = ", ".join(f"{v}: {i}" for i, v in enumerate(values))
    return Diagnosis(
        message + f"; the targets hold {classes} distinct values ({', '.join(values)}), one per "
        "class the model scores: label ids, never mapped to class indices"
        + (_made_here(used) if made is not None and used is not None else ""),
        fix=f"map the ids to class indices where the labels are made ({{{mapping}}}, e.g. with "
            "a lookup table indexed by the raw ids)",
        where=made[:2] if made is not None else None)


def _shape(t: Any) -> str:
    return str(tuple(t.shape)) if hasattr(t, "shape") else type(t).__name__


def _dtype(t: Any) -> str:
    return str(getattr(t, "dtype", "")).replace("torch.", "")
