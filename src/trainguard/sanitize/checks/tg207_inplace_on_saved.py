"""TG207 inplace-on-saved: an in-place op changed a tensor that autograd saved for backward.

What it watches: nothing per step. When a backward raises PyTorch's "one of the variables needed for
gradient computation has been modified by an inplace operation", the message gives the tensor's
shape, the op whose output it is and how many times it was changed.

When it fires: on that error; when the script catches it, at the end of the run (explained at
the failure). The diagnosis names the op and the shape, and points at the line that
changed the tensor: the in-place statements (``x += ...``, ``x[i] = ...``, ``x.add_(...)``,
``inplace=True``) in the user's own code that ran (the ``forward`` and other methods of the
models' classes seen, and the function that called backward) are searched, preferring one that modifies a variable assigned from
that op (``h = torch.sigmoid(...)`` then ``h += 1``); modules built with ``inplace=True`` are named.
A tensor changed through a view ("output 0 of torch::autograd::CopySlices": ``out = x`` then
``out[:, 1:] += y``) prefers an in-place statement on a subscript.
A name a ``forward`` read and then handed to a submodule whose first layer is an in-place
module of the op's kind (``nn.Sequential(nn.ReLU(inplace=True), ...)`` after ``self.shortcut(x)``,
pytorch/pytorch#15428) points at that module's construction (``core/inplace_reuse.py``).
Candidates that are one run of consecutive statements (a neck's ``c2 += ...; c3 += ...``,
open-mmlab/mmocr#884) are one fix, at their first; else the finding stays on the backward.
``running += loss.item()`` (a Python number made by a call on the right) is no candidate, nor,
before the first backward completed, a statement after the line its traceback frame runs. Else
the one ``m.inplace = True`` store, or ``inplace=True`` construction, of an in-place module of
another kind than the op (a Dropout overwriting a ReLU's output) in the model classes (also
``inplace=flag`` read from a config).
When the changed tensor is a parameter of a model seen (same shape and version, or its transpose:
``Linear`` saves ``weight.t()``, a view sharing the version counter), the diagnosis names it, the
optimizer holding it and the line of that optimizer's latest checked ``step()`` (recorded per
checked step), at the failing backward line. A saved tensor that needs no grad has no history
(the message names no op): a module's tensor attribute or buffer, or a traceback frame's
variable, of that shape and version is looked up (``core/inplace_statements.py``), and the one
in-place statement on it (``self.history += w``, pytorch/pytorch#22095) is the place, ahead of
a parameter matching by version.

Silent on: runs without this error; in-place ops on tensors autograd did not save.

Cost: only at PyTorch's in-place error: one pass over the models' parameters and modules, and one
parse of each user frame's file in the traceback (``bounds.parse_file``).

Reference: autograd notes "In-place operations with autograd"
(https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd); GitHub
JDAI-CV/LIO#9 ("output 0 of SubBackward0, is at version 1"), Seanny123/da-rnn#14 (``+=`` on a saved
tensor), pytorch/pytorch#96265; pytorch/pytorch#39141 (a GAN's ``opt_D.step()`` before the
generator's backward through D).
"""

from __future__ import annotations

import ast
import os
import re
from types import CodeType
from typing import Any, Iterator

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.caught import Caught
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.frames import is_user_file, short_location, user_location
from trainguard.sanitize.core.holders import traceback_user_frames
from trainguard.sanitize.core.inplace_reuse import reused_then_inplace
from trainguard.sanitize.core.inplace_statements import (Statement, changed_leaves,
                                                         inplace_statements, target_name)
from trainguard.sanitize.core.source import function_node

_MESSAGE = re.compile(
    r"modified by an inplace operation: \[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\],? (?:which is "
    r"output (?P<index>\d+) of (?:\w+::)*(?P<op>\w+), )?is at version (?P<now>\d+); "
    r"expected version (?P<then>\d+)")  # (a leaf, such as a parameter saved as itself, names no op)
# (an in-place op through a view, ``out[:, 1:] += y``, names the C++ node that rewrote the base's
# history: "output 0 of torch::autograd::CopySlices")


_VIEWS = frozenset({"T", "Transpose", "Permute", "View", "Unsafe", "UnsafeView", "Expand",
                    "Unsqueeze", "Squeeze", "Select", "Slice", "AsStrided", "Alias", "Unbind",
                    "Split", "SplitWithSizes", "Narrow", "Diagonal", "Reshape", "Detach"})


def _assigned_from(func: ast.AST, name: str, op: str) -> bool:
    """Whether ``func`` assigns ``name`` from an expression that mentions ``op`` (e.g. sigmoid)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(target_name(t) == name for t in node.targets):
            if op in ast.unparse(node.value).lower():
                return True
    return False


def _inplace_switch(models: list[Any], op: str) -> tuple[str, int, int, str] | None:
    """Where user code made a module of another kind than ``op`` in-place: the one
    ``m.inplace = True`` store in the methods of the classes of the models and their submodules
    (a loop switching every ReLU and Dropout, MVANet#2), else the one ``inplace=True``
    construction of such a module in their ``__init__``; None when there are none or several."""
    import dis

    per_model = [list(model.modules()) for model in models]
    inplace = {type(s).__name__.lower() for subs in per_model for s in subs
               if getattr(s, "inplace", False) is True}
    # (another kind changed the saved output; else one of the same kind applied to it: an
    # in-place activation first in a block, after the same activation, FUNIT#23)
    kinds = (inplace - {op.lower()}) or inplace
    if not kinds:
        return None
    named = " or ".join(sorted({type(s).__name__ for subs in per_model for s in subs
                                if type(s).__name__.lower() in kinds}))
    stores, built = set(), set()
    classes = {cls for subs in per_model for s in subs[:256] for cls in type(s).__mro__[:4]}
    files = set()
    for cls in classes:
        for func in vars(cls).values():
            code = getattr(func, "__code__", None)
            if not isinstance(code, CodeType) or not is_user_file(code.co_filename):
                continue
            files.add(code.co_filename)
            for ins in dis.get_instructions(code):
                if ins.opname == "STORE_ATTR" and ins.argval == "inplace" and ins.positions:
                    stores.add((code.co_filename, ins.positions.lineno, 1,
                                f"{named} made in-place by `.inplace = True`"))
            if code.co_name == "__init__":
                built |= _inplace_built(function_node(code), code.co_filename, kinds)
    if not stores and not built:  # built by a helper of the file (``get_activation(name)``)
        for filename in files:
            built |= _inplace_built(parse_file(filename), filename, kinds)
    found = stores or built
    return next(iter(found)) if len(found) == 1 else None


def _inplace_built(node: ast.AST | None, filename: str, kinds: set[str]
                   ) -> set[tuple[str, int, int, str]]:
    """The ``X(..., inplace=True)`` constructions under ``node`` of a module kind in ``kinds``
    (lower-case class names), as candidate places; also ``X(..., inplace=flag)``, the flag read
    from a config (a module of that kind is in-place at run time, so its value was True)."""
    return {(filename, call.lineno, call.col_offset + 1,
             f"the `{ast.unparse(call.func)}(..., inplace={ast.unparse(flag)})` built")
            for call in (ast.walk(node) if node is not None else ())
            if isinstance(call, ast.Call)
            for flag in [next((k.value for k in call.keywords if k.arg == "inplace"), None)]
            if flag is not None and (not isinstance(flag, ast.Constant) or flag.value is True)
            and ast.unparse(call.func).rsplit(".", 1)[-1].lower() in kinds}


class InplaceOnSaved(Check):
    code = "TG207"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # id(optimizer) -> the user's line of its latest checked step() (for the diagnosis)
        self.stepped_at: dict[int, Any] = {}
        self.caught = Caught(4)  # (diagnosis, backward's line) of each error, until claimed

    def on_backward_failed(self, call: Any, exc: BaseException) -> None:
        """Explain the error now, while the models and frames are alive: reported at exit if
        the script catches it (``except RuntimeError:`` around the step)."""
        if isinstance(exc, RuntimeError) and _MESSAGE.search(str(exc)) and not self.caught.full:
            found = self._explain(exc)
            if found is not None:
                self.caught.hold(exc, (found, call.where))

    def on_exit(self) -> None:
        for found, where in self.caught.drain():
            self.report(f"{found.message}; backward raised and the script caught the error",
                        fix=found.fix, where=found.where or where)

    def on_step(self, optimizer: Any) -> None:
        self.stepped_at[id(optimizer)] = user_location()

    def _parameter(self, m: re.Match) -> tuple[str, Any] | None:
        """``("`weight_hh_l0` (6, 6) of RNN", parameter)`` when the changed tensor is a parameter
        of a model seen, or its transpose (``Linear`` saves ``weight.t()``, a view sharing the
        parameter's version counter)."""
        shape = tuple(int(d) for d in m.group("shape").replace(" ", "").split(",") if d)
        now = int(m.group("now"))
        found = None
        for model in list(self.state.models):
            for name, p in model.named_parameters():
                if p._version != now:
                    continue
                if tuple(p.shape) == shape:
                    return f"`{name}` {shape} of {type(model).__name__}", p
                if found is None and len(shape) == 2 and tuple(p.shape) == shape[::-1]:
                    found = (f"`{name}` {tuple(p.shape)} of {type(model).__name__} (saved "
                             f"transposed, {shape})", p)
        return found

    def _parameter_diagnosis(self, m: re.Match, param: str, tensor: Any,
                             exc: BaseException) -> Diagnosis:
        """Backward through a graph that saved a parameter an optimizer step changed since.
        Reported at that ``step()`` when it ran earlier in a function the failing backward's
        call is still in, before the line that led to the backward (a GAN's ``opt_D.step()``
        between D's forward for the generator loss and the generator's backward: the step to
        move); else at the failing backward (a graph carried from an earlier iteration)."""
        failed = next((b for b in reversed(self.state.backwards) if b.failed), None)
        step = self._step_of(tensor)
        where = failed.where if failed is not None else None
        if step is not None and _earlier_in_call(step, exc):
            where = step
        return Diagnosis(
            f"backward needs the parameter {param} as it was when this graph was built, but "
            f"it was updated in place since{self._stepped_by(tensor)} (version "
            f"{m.group('then')} -> {m.group('now')}): this backward runs through a graph made "
            "before that optimizer step, kept by a tensor carried across iterations or by "
            "retain_graph=True (a GAN stepping D before the generator's backward through D)",
            fix="call backward through each graph before the optimizer.step() that updates its "
                "parameters (or recompute the forward after the step), and detach what is "
                "carried to the next iteration (hidden = hidden.detach())",
            where=where)

    def _step_of(self, param: Any) -> Any:
        """The user's line of the latest checked ``step()`` of the optimizer holding ``param``."""
        for optimizer in list(self.state.optimizers):
            if any(p is param for g in optimizer.param_groups for p in g["params"]):
                return self.stepped_at.get(id(optimizer))
        return None

    def _stepped_by(self, param: Any) -> str:
        """``" by Adam.step() at gan.py:16"``: the optimizer holding ``param``, and the line of its
        latest step seen."""
        for optimizer in list(self.state.optimizers):
            if any(p is param for g in optimizer.param_groups for p in g["params"]):
                where = self.stepped_at.get(id(optimizer))
                at = f" at {short_location(where)}" if where else ""
                return f" by {type(optimizer).__name__}.step(){at}"
        return ""

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        # the run dies of it: explained there, from its whole traceback (at the failure it
        # held only the frames from backward inwards)
        self.caught.claim(exc)
        return self._explain(exc)

    def _explain(self, exc: BaseException) -> Diagnosis | None:
        if not isinstance(exc, RuntimeError):
            return None
        m = _MESSAGE.search(str(exc))
        if m is None:
            return None
        if m.group("op") is None:  # a leaf: a parameter, or a tensor that needs no grad
            # (a user statement changing a tensor of that shape and version outweighs a
            # parameter's version matching by chance: initialisation bumps it too)
            leaf, placed = self._leaf_diagnosis(m, exc)
            found = None if placed else self._parameter(m)
            return self._parameter_diagnosis(m, *found, exc) if found is not None else leaf
        op = m.group("op").replace("Backward", "").rstrip("0123456789")
        # a parameter is saved as itself or a view of it (Linear saves weight.t()); an optimizer
        # updates it under no_grad, which leaves its history alone, so a tensor whose history
        # names any other op ("output 0 of Div" after `out /= norm`) is not a parameter
        found = self._parameter(m) if op in _VIEWS else None
        if found is not None:
            return self._parameter_diagnosis(m, *found, exc)
        shape = f"({m.group('shape')})"
        times = int(m.group("now")) - int(m.group("then"))
        # The modified tensor's grad_fn is rebased onto the in-place op itself ("output 0 of Sub"
        # after `h -= 1`), else it names the op that made it ("Sigmoid" before `h.mul_(2)`).
        candidates: list[tuple[str, int, int, str]] = []
        by_op, by_source = None, None
        for code, func, (line, col, name, what, inplace_op, _) in self._statements_run(exc):
            here = (code.co_filename, line, col, what)
            if here not in candidates:
                candidates.append(here)
            if by_op is None and inplace_op == op.lower():
                by_op = here
            if by_source is None and name and _assigned_from(func, name, op.lower()):
                by_source = here
        best = by_op or by_source
        modules = sorted({f"{type(s).__name__}(inplace=True)" for model in list(self.state.models)
                          for s in model.modules() if getattr(s, "inplace", False) is True})
        seen = (f"backward needs a tensor of shape {shape} saved during the forward (output "
                f"{m.group('index')} of {op}), but an in-place operation changed it afterwards "
                f"({times} change{'s' if times != 1 else ''}: version {m.group('then')} -> "
                f"{m.group('now')})")
        fix = ("make that operation out of place (h = h + 1 instead of h += 1, x = x.clamp(...) "
               "instead of x.clamp_(...), inplace=False), or clone the tensor before "
               "changing it")
        failed = next((b for b in reversed(self.state.backwards) if b.failed), None)
        if best is None and candidates and all(  # one candidate, or one run of consecutive lines
                c[0] == candidates[0][0] and c[1] == candidates[0][1] + i
                for i, c in enumerate(candidates)):
            best = candidates[0]
        if best is None and modules:
            best = reused_then_inplace(list(self.state.models), op) or \
                _inplace_switch(list(self.state.models), op)
        if best is not None:
            return Diagnosis(f"{seen}: {best[3]} here changed it", fix=fix, where=best[:3])
        listed = "; ".join(f"{os.path.basename(p)}:{line} {w}" for p, line, _, w in candidates[:3])
        extra = f"; in-place candidates: {listed}" if listed else ""
        mods = f"; modules with inplace=True: {', '.join(modules[:3])}" if modules else ""
        return Diagnosis(f"{seen}{extra}{mods}", fix=fix + "; to find the op for sure, run once "
                         "under torch.autograd.set_detect_anomaly(True)",
                         where=failed.where if failed is not None else None)


    def _statements_run(self, exc: BaseException) -> Iterator[tuple[CodeType, ast.AST, Statement]]:
        """The in-place statements that may have run: in the methods of the models' classes
        (``forward`` first) and in the user's functions of ``exc``'s traceback."""
        codes: dict[CodeType, None] = {}
        for model in list(self.state.models):
            for sub in model.modules():  # forward first, then the class's other methods
                for fn in (getattr(type(sub), "forward", None), *vars(type(sub)).values()):
                    code = getattr(fn, "__code__", None)  # (log2feats(), which forward calls)
                    if code is not None and is_user_file(code.co_filename) and \
                            not code.co_name.startswith("__"):  # (not __init__'s set-up)
                        codes[code] = None
        # a frame of the traceback ran only the lines up to the one it is running; before the
        # first backward completed, no iteration of its loop got past that line (the statements
        # after it, a clip_grad_norm_ after the backward, have not run yet)
        upto: dict[CodeType, int] = {}
        for frame in traceback_user_frames(exc):
            codes[frame.f_code] = None
            if not self.state.backward_count:
                upto.setdefault(frame.f_code, frame.f_lineno)
        for code in codes:
            func = function_node(code)
            for statement in inplace_statements(func) if func is not None else ():
                if statement[0] <= upto.get(code, statement[0]):  # (else not run yet)
                    yield code, func, statement

    def _leaf_diagnosis(self, m: re.Match, exc: BaseException) -> tuple[Diagnosis, bool]:
        """The changed tensor had no history (the message names no op), such as a
        module's running ``self.history`` that needs no grad and
        ``torch.minimum(w, self.history)`` saved; its shape and version pick it among the
        modules' attributes and buffers and the traceback's variables, and the in-place
        statement on it is the place (True with the diagnosis when one was found)."""
        shape = tuple(int(d) for d in m.group("shape").replace(" ", "").split(",") if d)
        leaves = changed_leaves(list(self.state.models), traceback_user_frames(exc), shape,
                                int(m.group("now")))
        hits = {(c.co_filename, st[0], st[1], st[3]): leaves[st[5]]
                for c, _, st in self._statements_run(exc) if st[5] in leaves}
        times = int(m.group("now")) - int(m.group("then"))
        named = next(iter(hits.values()), None) or " or ".join(leaves.values()) or "a tensor"
        seen = (f"backward needs {named} {shape} as the forward saved it (a tensor with no "
                f"autograd history), but an in-place operation changed it afterwards ({times} "
                f"change{'s' if times != 1 else ''}: version {m.group('then')} -> "
                f"{m.group('now')})")
        fix = ("update it out of place (self.history = self.history + w instead of "
               "self.history += w), or hand the forward a clone (self.history.clone())")
        if len(hits) == 1:
            where = next(iter(hits))
            return Diagnosis(f"{seen}: {where[3]} here changed it", fix=fix, where=where[:3]), True
        failed = next((b for b in reversed(self.state.backwards) if b.failed), None)
        listed = "; ".join(f"{os.path.basename(p)}:{line} {w}" for p, line, _, w in hits)
        return Diagnosis(f"{seen}" + (f"; in-place candidates: {listed}" if listed else ""),
                         fix=fix + "; to find the op for sure, run once under "
                         "torch.autograd.set_detect_anomaly(True)",
                         where=failed.where if failed is not None else None), False


def _earlier_in_call(where: Any, exc: BaseException) -> bool:
    """Whether ``where`` lies in a function of ``exc``'s traceback, above the line that frame
    was running: it ran earlier in the same call."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == where[0] and code.co_firstlineno <= where[1] < tb.tb_lineno and \
                where[1] <= max((ln for _, _, ln in code.co_lines() if ln), default=0):
            return True
        tb = tb.tb_next
    return False
