"""TG504 incomplete-checkpoint: a resume checkpoint that leaves the optimizer out.

What it watches: every ``torch.save`` call's object (no tensor values are read), the
``torch.load`` of files saved without optimizer state, and the LR schedulers the user steps.

When it fires: the saved object is a dict that holds a model's state (an ``nn.Module`` or a
``state_dict``: a mapping of names to tensors) while an optimizer that has stepped in this run is
alive, and
- (a checkpoint written as several files by one call of a save function counts as one: the
  weights in one file, the step or scheduler state in another; judged when an optimizer step
  follows, reported at the file with the step)
- it holds no optimizer state (``optimizer.state_dict()``, the optimizer, or a list of them) and it
  is meant for resuming: it holds a progress counter (a number under a key naming an epoch, step or
  iteration), or, whatever its keys, the file is loaded back in this run and an optimizer steps
  after that (a resume seen happening; reported at the save); so is a model's ``state_dict`` saved
  alone to a file named for its step (``step_20``, ``epoch_3.pt``: the step kept only in the name,
  SamsungSAILMontreal/TinyRecursiveModels#56) that is loaded back and trained on. Resuming restarts
  Adam's moments or the momentum from zero: the loss jumps and the run is not the one that would
  have continued;
- or it holds the optimizer's state but not that of a live LR scheduler the user stepped, or of an
  enabled GradScaler in use held by the user's frames that led to the save (a local, ``self.scaler``,
  a global), and training goes on after it (an optimizer step follows; reported then): the
  resumed run restarts the schedule, or the loss scale from its initial value. A save after the
  run's last step is the result of training, not a point to resume from;
- or it holds the optimizer's state, is loaded back, and the first step of an optimizer training
  parameters alive at the load finds it with no state while it has the class and settings of the
  one saved: the resume put the weights back but not the optimizer's state (reported at the last
  ``.load_state_dict`` after the ``torch.load``).

Where: the ``torch.save`` line, or, when ``torch.save`` sits in a helper that was handed the dict
(the ImageNet example's ``save_checkpoint(state, is_best, filename)``), the user's line that
called the helper with it; and there, when the dict is written in the source (a dict display
passed to the call, the one last assigned to the name passed or returned by the user's function
called there), the line of its last entry, where the missing state belongs.

Silent on: a model's weights saved alone and never trained on after a reload (an export, a bundle
reloaded for evaluation), another model's state (none of its tensors a live optimizer's parameter,
some another live module's: an EMA copy; one heap scan), dicts without a progress counter not
loaded back, checkpoints with every live companion's state (objects, state dicts or lists of them:
Lightning's ``optimizer_states``), runs without an optimizer step. Judged by what it holds and by
what the run does with it, not by its key names.

Cost: per ``torch.save`` of a dict, one pass over its items (a state_dict's tensors checked by
type) and the user frames that passed the dict down; per resume checkpoint (model and optimizer
state) the locals, globals and ``self`` attributes of 8 user frames (256 names each) for a
GradScaler; after a model-only checkpoint is loaded back, the next optimizer step.

Reference: PyTorch recipe "Saving and loading a general checkpoint"
https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html; AMP
docs "Saving/Resuming" https://pytorch.org/docs/stable/notes/amp_examples.html#saving-resuming;
GitHub issue https://github.com/NVlabs/stylegan2-ada-pytorch/issues/108.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import weakref
from collections.abc import Mapping
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.ckpt_states import (another_models_state, is_model_state,
                                                  is_optimizer_state, is_scaler_state,
                                                  is_scheduler_state, live_parameters,
                                                  optimizer_settings, saves_what_it_is_given,
                                                  scaler_in_use, trainer_of)
from trainguard.sanitize.core.frames import frame_location, is_user_code, user_frame
from trainguard.sanitize.core.returned_dict import returned_dict_line
from trainguard.sanitize.core.source import SourceFile, last_assigned

_PROGRESS = re.compile(r"epoch|step|iter", re.IGNORECASE)
# a file name that carries a progress counter: ``step_20``, ``epoch-3.pt``, ``iter1000.pth``
_STEP_NAMED = re.compile(r"(epoch|step|iter)[a-z]*[_-]?\d+", re.IGNORECASE)
_NUMBERED = re.compile(r"(?:^|[_.-])\d+\.(?:pth?|ckpt|bin|tar)$")  # 00005.pth, model-12.pt


class IncompleteCheckpoint(Check):
    code = "TG504"
    # only after a checkpoint without optimizer state was loaded back, or one without a live
    # scheduler's or scaler's state was saved
    on_demand = ("on_step", "on_step_pre")

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.schedulers: list[Any] = []  # weak references to LR schedulers the user stepped
        self.partial: dict[str, tuple[Any, str]] = {}  # path -> (where, what) of model-only saves
        # (where, what it holds, file name, the parameters alive then) of a file loaded back
        self.resumed: tuple[Any, str, str, Any] | None = None
        # (keys, companions left out, where) of the latest checkpoint with the optimizer but not
        # a live scheduler or scaler, until an optimizer step follows it
        self.unfinished: tuple[str, list[str], Any] | None = None
        # code objects of save sites whose frames held no GradScaler in use once steps had run
        # (a scaler scales its first loss before any step): not looked at again
        self.no_scaler: set[Any] = set()
        # one checkpoint written as several files by one call of a save function: [(id, code) of
        # its frame, model state saved, optimizer state saved, (where, keys) of the first file
        # with a progress counter or scheduler state], judged at the next step
        self.split: list[Any] | None = None
        # path -> (steps then, (type, settings) of the optimizer training the weights) of the
        # first save of a model's state_dict alone to that file
        self.saved: dict[str, tuple[int, Any]] = {}
        # path -> (type, settings) of the optimizer whose state a checkpoint saved there holds
        self.complete: dict[str, Any] = {}
        # ((type, settings), parameters alive, where, file name) of such a checkpoint loaded back
        self.reload: tuple[Any, Any, Any, str] | None = None

    def on_scheduler_step(self, scheduler: Any) -> None:
        if not any(ref() is scheduler for ref in self.schedulers):
            self.schedulers = [r for r in self.schedulers if r() is not None][-7:]
            self.schedulers.append(weakref.ref(scheduler))

    def on_save(self, obj: Any, f: Any) -> None:
        if not isinstance(obj, Mapping) or not self.state.optimizers:
            return
        model_keys = [k for k, v in obj.items() if is_model_state(v)]
        if not model_keys:
            name = os.path.basename(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else ""
            if is_model_state(obj) and (_STEP_NAMED.search(name) or _NUMBERED.search(name)):
                # a model's state_dict alone in a file named for its step (``step_20``,
                # ``00005.pth``): the step kept only in the name; a resume if it is loaded back
                # and trained on (a file numbered otherwise: by a fresh optimizer only)
                self.partial[os.path.abspath(os.fspath(f))] = (
                    _built_at(obj, sys._getframe(1)), "a model's state_dict alone, the step "
                    "only in the file name", not _STEP_NAMED.search(name))
            elif name and is_model_state(obj):
                self._periodic(obj, os.path.abspath(os.fspath(f)))
            self._split_part(obj, sys._getframe(1))
            return
        keys = ", ".join(repr(k) for k in list(obj)[:8])
        caller = sys._getframe(1)  # (where the dict was built is read only when it is needed)
        progress = [k for k, v in obj.items() if isinstance(k, str) and _PROGRESS.search(k)
                    and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not any(is_optimizer_state(v) for v in obj.values()):
            if another_models_state([obj[k] for k in model_keys], self.state.optimizers):
                return  # another model's state (to publish, an EMA copy): no resume of this run
            if progress:
                self._missing(f"keys {keys}: model state and {progress[0]!r}", "optimizer",
                              _built_at(obj, caller))
            elif isinstance(f, (str, os.PathLike)):  # resume-like only if loaded back and trained
                self.partial[os.path.abspath(os.fspath(f))] = (_built_at(obj, caller),
                                                                f"keys {keys}: model state",
                                                                False)
            return
        if isinstance(f, (str, os.PathLike)) and isinstance(obj[model_keys[0]], Mapping):
            trainer = trainer_of(obj[model_keys[0]], self.state.optimizers)
            if trainer is not None:
                self.complete = {**dict(list(self.complete.items())[-15:]),
                                 os.path.abspath(os.fspath(f)):
                                 (type(trainer), optimizer_settings(trainer))}
        left = self._companions_left_out(obj)
        if left:
            # reported once training goes on after it (an optimizer step follows): a save after
            # the last step, the end of the run's training, is an export of the result
            self.unfinished = (keys, left, _built_at(obj, caller))
            self.arm()

    def _periodic(self, obj: Mapping, path: str) -> None:
        """A model's ``state_dict`` saved alone, again and again to one file while an optimizer
        with state trains those weights (the latest weights of a run that goes on): a resume
        point if a fresh optimizer of the same kind and settings trains them after a reload."""
        trainer = trainer_of(obj, self.state.optimizers)
        if trainer is None:
            return
        setup = (type(trainer), optimizer_settings(trainer))
        first = self.saved.get(path)
        if first is None or first[1] != setup:
            self.saved = {**dict(list(self.saved.items())[-15:]), path: (self.state.step, setup)}
        elif self.state.step > first[0]:  # saved again after more steps: a periodic save
            self.partial[path] = (_built_at(obj, sys._getframe(2)),
                                  "a model's state_dict alone, saved as training went on", setup)

    def _split_part(self, obj: Mapping, caller: Any) -> None:
        """One file of a checkpoint that a save function writes as several (the weights in one
        file, the scheduler and step in another: OneVision-Encoder's ``save_checkpoint``): the
        files one call of the function writes are one checkpoint."""
        site = user_frame(caller)
        if site is None:
            return
        key = (id(site), site.f_code)
        if self.split is None or self.split[0] != key:
            self.split = [key, False, False, None]
        part = self.split
        if is_model_state(obj):
            part[1] = True
        elif is_optimizer_state(obj) or any(is_optimizer_state(v) for v in obj.values()):
            part[2] = True
        elif part[3] is None and any(
                isinstance(k, str) and _PROGRESS.search(k) and isinstance(v, (int, float)) and
                not isinstance(v, bool) or is_scheduler_state(v) for k, v in obj.items()):
            part[3] = (_built_at(obj, caller), ", ".join(repr(k) for k in list(obj)[:8]))
        if part[1] and part[3] is not None and not part[2]:
            self.arm()  # judged when training goes on (the optimizer may still be saved)

    def on_load(self, f: Any, kwargs: dict) -> None:
        if self.complete and isinstance(f, (str, os.PathLike)):
            setup = self.complete.get(os.path.abspath(os.fspath(f)))
            if setup is not None:  # a checkpoint with the optimizer's state: is it loaded?
                self.reload = (setup, live_parameters(), _load_site(sys._getframe(1)),
                               os.path.basename(os.fspath(f)))
                self.arm()
        if self.partial and isinstance(f, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(f))
            if path in self.partial:
                # numbered: True for numbered weights, the (type, settings) of the optimizer
                # that trained weights saved periodically; a fresh optimizer must train them
                where, keys, numbered = self.partial.pop(path)
                # optimizers that already stepped keep their state in memory: stepped on after
                # a reload of numbered weights (the best epoch's), they continue, not resume
                stepped = {id(o) for o in self.state.optimizers if o.state} if numbered else None
                setup = numbered if isinstance(numbered, tuple) else None
                self.resumed = (where, keys, os.path.basename(path), live_parameters(), stepped,
                                setup)
                self.arm()

    def on_step_pre(self, optimizer: Any) -> None:
        """The first step, after a checkpoint with the optimizer's state was loaded back, of an
        optimizer that trains the weights alive then: an optimizer of the kind and settings that
        was saved, with no state (neither loaded nor stepped), restarts what the file held."""
        if self.reload is None:
            return
        setup, alive, where, name = self.reload
        if not any((r := alive.get(id(p))) is not None and r() is p
                   for g in optimizer.param_groups for p in g["params"]):
            return  # another model's optimizer
        self.reload = None
        if optimizer.state or setup != (type(optimizer), optimizer_settings(optimizer)):
            return  # its state was loaded (or it trains on), or new settings fine-tune
        self.report(
            f"the resume from {name!r} loads the model's state but not the optimizer's that the "
            f"checkpoint holds: the {type(optimizer).__name__} steps with empty state, so its "
            "momentum/moment estimates and step counts restart from zero and the run is not "
            "the one that would have continued",
            fix="call optimizer.load_state_dict(checkpoint['optimizer']) (and the scheduler's "
                "and GradScaler's) where the model's state is loaded", where=where)

    def on_step(self, optimizer: Any) -> None:
        part, self.split = self.split, None
        if part is not None and part[1] and part[3] is not None and not part[2]:
            where, keys = part[3]
            self._missing(f"keys {keys}, in a file written beside the model's state by the same "
                          "call", "optimizer", where)
        if self.unfinished is not None:
            keys, left, where = self.unfinished
            self.unfinished = None
            self.report(
                f"torch.save of a resume checkpoint (keys {keys}: model and optimizer state) "
                f"leaves out the live {' and '.join(left)}: resuming from it "
                + ("restarts the loss scale at its initial value (the first steps after a resume "
                   "overflow and are skipped) " if "GradScaler" in left[-1] else "")
                + "and the run is not the one that would have continued",
                fix="add their state_dict() to the checkpoint ('scaler': scaler.state_dict(), "
                    "'lr_scheduler': scheduler.state_dict()) and load them when resuming",
                where=where)
        # an optimizer stepped after a model-only checkpoint was loaded back: it was a resume
        if self.resumed is not None:
            where, keys, name, alive, stepped, setup = self.resumed
            # a resume trains parameters that existed when the file was read (it went into
            # them); a model built after the load (the next fold of a cross-validation) is new
            trains = any((r := alive.get(id(p))) is not None and r() is p
                         for g in optimizer.param_groups for p in g["params"])
            if stepped is not None and (not trains or id(optimizer) in stepped):
                return  # numbered weights: waiting for an optimizer with no state to train them
            self.resumed = None
            # a fresh optimizer of other settings (a lower lr) fine-tunes the weights: no resume
            if not trains or setup not in (None, (type(optimizer), optimizer_settings(optimizer))):
                if self.reload is None:
                    self.disarm()
                return
            self._missing(f"{keys}, loaded back from {name!r} and trained on",
                          "optimizer", where)
        if self.reload is None:
            self.disarm()  # (nothing is waiting for a step any more)

    def _missing(self, holds: str, what: str, where: Any) -> None:
        live = sorted({type(o).__name__ for o in self.state.optimizers})
        schedulers = sorted({type(s).__name__ for s in (r() for r in self.schedulers) if s})
        self.report(
            f"torch.save of a resume checkpoint ({holds}) leaves out the state of the live "
            f"{'/'.join(live)} {what}: resuming restarts its momentum/moment estimates and step "
            "counts from zero" + (f", and the live {'/'.join(schedulers)} its learning-rate "
                                  "schedule" if schedulers else ""),
            fix="add 'optimizer': optimizer.state_dict() (and the scheduler's and GradScaler's "
                "state_dict(), RNG states) to the checkpoint and load them when resuming",
            where=where)

    def _scaler_in_use(self, start: Any) -> bool:
        site = user_frame(start)
        code = site.f_code if site is not None else None
        if code in self.no_scaler:
            return False
        found = scaler_in_use(start)
        if not found and code is not None and self.state.step:
            self.no_scaler.add(code)
        return found

    def _companions_left_out(self, obj: Mapping) -> list[str]:
        """The live LR scheduler (stepped by the user) and enabled GradScaler (in use) whose state
        ``obj`` does not hold (the GradScaler looked for in the user's frames that saved it)."""
        left = []
        values = [*obj.values(), *(v for x in obj.values() if isinstance(x, Mapping)
                                   for v in x.values())]
        if any(ref() is not None for ref in self.schedulers) \
                and not any(is_scheduler_state(v) for v in values):
            left.append(type(next(r() for r in self.schedulers if r() is not None)).__name__)
        if not any(is_scaler_state(v) for v in values) and self._scaler_in_use(sys._getframe(2)):
            left.append("GradScaler")
        return left


def _built_at(obj: Any, start: Any) -> Any:
    """Where the checkpoint dict was built: the line of ``torch.save``, or, when ``torch.save``
    sits in a helper that was handed the dict (``save_checkpoint(state, ...)``), the line of the
    user's code that called the helper with it (outermost such caller); or, when the function
    that built it takes an optimizer parameter left ``None``, the line that called it without
    one. None: the default line."""
    frame = user_frame(start)
    while frame is not None:
        code = frame.f_code
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        local = frame.f_locals
        if not any(local.get(name) is obj for name in params):
            break  # built in this function
        caller = frame.f_back
        if caller is None or not is_user_code(caller.f_code):
            break
        frame = caller
    if frame is None:
        return None
    caller = frame.f_back
    if caller is not None and is_user_code(caller.f_code) and saves_what_it_is_given(frame):
        # a helper that saves the optimizer when given one (``optimizer=None``), or whatever
        # objects it is handed (``**objects``), called without it: the call is what to change
        return frame_location(caller)
    where = frame_location(frame)
    try:
        return _entries_line(where, frame, obj)
    except (OSError, ValueError, SyntaxError, RecursionError):
        return where


def _entries_line(where: Any, frame: Any, obj: Any) -> Any:
    """The line of the checkpoint dict's last entry, where a missing state belongs: in the dict
    display passed to the call at ``where`` (``torch.save({...}, path)``), or in the one last
    assigned to the name passed (``state = {...}`` then ``torch.save(state, path)``), or in the
    ``return`` of the user's function called there; ``where`` when the dict is not written so."""
    file = SourceFile.load(where[0])
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    if call is None:
        return where
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Dict) and arg.values:
            return (where[0], _last_entry(arg), 1)
        if isinstance(arg, ast.Call) and (line := returned_dict_line(arg, frame, obj)):
            return line  # ``torch.save(state.state_dict(), path)``: the method's dict
        if isinstance(arg, ast.Name) and frame.f_locals.get(arg.id) is obj:
            line = _assigned(file, call, arg.id)
            return (where[0], line, 1) if line else where
    return where


def _last_entry(node: ast.Dict) -> int:
    key = node.keys[-1]
    return (key if key is not None else node.values[-1]).lineno


def _assigned(file: SourceFile, call: ast.Call, name: str) -> int | None:
    """The line of the last entry of the last ``name = {...}`` (or ``dict(...)``) before ``call``
    in its function; of a dict comprehension, the line of the keys it iterates."""
    value = last_assigned(file.scope(call), name, call.lineno, (ast.Dict, ast.Call, ast.DictComp))
    if isinstance(value, ast.Dict) and value.values:
        return _last_entry(value)
    if isinstance(value, ast.DictComp):  # ``{k: objs[k].state_dict() for k in self.keys}``
        return value.generators[0].iter.lineno
    if (isinstance(value, ast.Call) and getattr(value.func, "id", "") == "dict"
            and value.keywords):
        return value.keywords[-1].lineno
    return None


def _load_site(start: Any) -> Any:
    """Where a resume loads the checkpoint: the last ``.load_state_dict(...)`` call after the
    user's ``torch.load`` line in its function (where the optimizer's belongs beside it), or the
    ``torch.load`` line. None: the default line."""
    frame = user_frame(start)
    if frame is None:
        return None
    where = frame_location(frame)
    try:
        file = SourceFile.load(where[0])
        call = file.call_at(where[1], where[2] - 1) if file is not None else None
        if call is None:
            return where
        lines = [n.lineno for n in ast.walk(file.scope(call)) if isinstance(n, ast.Call)
                 and getattr(n.func, "attr", "") == "load_state_dict" and n.lineno > call.lineno]
    except (OSError, ValueError, SyntaxError, RecursionError):
        return where
    return (where[0], max(lines), 1) if lines else where
