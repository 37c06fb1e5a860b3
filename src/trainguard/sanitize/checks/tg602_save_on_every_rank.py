"""TG602 save-on-every-rank: several ranks write the same file with ``torch.save``, or open it
for writing in their own code (a log, a metrics file: ``on_file_write``).

What it watches: under ``torchrun``, and in the processes a watched script starts itself through
``torch.multiprocessing`` (``mp.spawn``, ``mp.Process``: ``ranks/children.py``), the target of every ``torch.save``: a path (``str`` or
``os.PathLike``) or an open file with a path ``name``, resolved to an absolute real path, with the
user's line and the number of writes (up to 256 distinct files per rank). At exit every rank sends
its list to rank 0.

When it fires: on rank 0 (the parent, for children), when the reports show two or more ranks on the same host writing the same
file. Their writes race: a checkpoint interleaved with or cut by another rank's write fails to load
("PytorchStreamReader failed reading zip archive", "storage has wrong size"). Reported once per
file, for the lowest rank that wrote it, at the line where a rank check belongs: in the function
that runs the training step (the first ``optimizer.step()`` seen), the line that led to the save
(``save_checkpoint(state, ...)`` in the epoch loop, the ``torch.save`` itself when the loop calls
it; the call of the writing function when it is made past that frame: a trainer's
``validate()`` calling ``save_best(...)``), with the ``torch.save`` line in the message when they
differ; ``ranks`` the ranks that wrote it. A file written by a method of a user's writer object
(not a module, not the trainer, not a dispatched callback) is reported where that object is
built, when the user's files build it at one place; a file first written before the first
step (a log opened in the writer's ``__init__``) is placed once that step's stack is known.

Silent on: saves guarded by a rank check (``if rank == 0``, a ``master_process`` flag, a helper
such as ``save_on_master``: one rank writes), per-rank file names (``f"rng_rank{rank}.pt"``),
``torch.save`` into memory (``io.BytesIO``), the distributed checkpoint API that every rank must
call (``torch.distributed.checkpoint.save`` writes one file per rank), a single process. The same
path on two hosts is not reported: on local disks those are two files (a shared filesystem makes
it a miss).

Cost: under torchrun, the user's call stack at the first checked ``optimizer.step()``; per
``torch.save``, one dict update (256 paths at most), and the call stack at a file's first save; at
exit, the ranks' lists merged on rank 0.

Reference: DDP tutorial, "Save and Load Checkpoints" (save from one process)
https://pytorch.org/tutorials/intermediate/ddp_tutorial.html#save-and-load-checkpoints; GitHub
DLLXW/baby-llama2-chinese#56 (both ranks save to one file, ``torch.load`` then fails)
https://github.com/DLLXW/baby-llama2-chinese/pull/56; NVIDIA/apex#629
https://github.com/NVIDIA/apex/issues/629.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from trainguard.sanitize.core.callstack import (cause_line, dispatched, shared_depth,
                                               user_stack)
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import is_user_code, user_frame, user_location
from trainguard.sanitize.core.source import constructed_at

_LIMIT = 256


class SaveOnEveryRank(Check):
    code = "TG602"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # real path -> [the line to guard (path, line, col), writes, the torch.save line]
        self.saves: dict[str, list] = {}
        self.step_stack: Any = None  # the user's stack at the first checked step (torchrun only)
        # files first written before that step (a log opened where its writer is built): path ->
        # (the writing stack, the writer's class), placed once the step's stack is known
        self.early: dict[str, tuple[Any, Any]] = {}

    def on_step(self, optimizer: Any) -> None:
        if self.step_stack is None and self.bus.ranks is not None:
            self.step_stack = user_stack(sys._getframe(1))
            for target, (stack, writer) in self.early.items():
                where = self._guard_line(stack, writer)
                if where is not None:
                    self.saves[target][0] = list(where)
            self.early.clear()

    def on_save(self, obj: Any, f: Any) -> None:
        self._wrote(f, "torch.save", sys._getframe(1))

    def on_file_write(self, path: Any) -> None:
        """``open(path, "a")`` in user code (a log, a metrics file), in a run of several ranks."""
        self._wrote(path, "open", sys._getframe(1))

    def _wrote(self, f: Any, how: str, caller: Any) -> None:
        if self.bus.ranks is None:
            return
        target = _target(f)
        if target is None or target.startswith(("/dev/", "/proc/")):
            return
        known = self.saves.get(target)
        if known is not None:
            known[1] += 1
        elif len(self.saves) < _LIMIT:
            saved_at = user_location(caller) or ("<unknown>", 0, 1)
            stack, writer = user_stack(caller), _writer_class(caller)
            where = self._guard_line(stack, writer)
            if self.step_stack is None:
                self.early[target] = (stack, writer)
            self.saves[target] = [list(where or saved_at), 1, list(saved_at), how]

    def _guard_line(self, stack: Any, writer: Any) -> Any:
        """Where the rank check belongs for a write made from ``stack`` (by a method of
        ``writer``, a user class, or None), judged against the first step's stack."""
        if self.step_stack is None:
            return None
        depth = shared_depth(stack, self.step_stack)
        return _writer_built(writer, stack, self.step_stack, depth) or \
            _helper_call(stack, depth) or \
            cause_line(stack, self.step_stack, past_dispatch=True)

    def rank_facts(self) -> Any:
        if not self.saves:
            return None
        return {"host": self.bus.ranks.host,
                "saves": [[path, where, n, at, how]
                          for path, (where, n, at, how) in self.saves.items()]}

    def on_ranks(self, facts: dict[int, Any]) -> None:
        writers: dict[tuple[str, str], list[tuple[int, list, int]]] = {}
        for rank, fact in sorted(facts.items()):
            for path, where, n, at, how in fact.get("saves", []):
                writers.setdefault((fact.get("host", ""), path), []).append(
                    (rank, where, n, at, how))
        for (host, path), seen in writers.items():
            ranks = sorted({rank for rank, _, _, _, _ in seen})
            if len(ranks) < 2:
                continue
            writes = ", ".join(f"rank {rank}: {n}x" for rank, _, n, _, _ in seen)
            where, at, how = seen[0][1], seen[0][3], seen[0][4]
            saved = (f" ({how} at {os.path.basename(at[0])}:{at[1]})"
                     if tuple(at[:2]) != tuple(where[:2]) else "")
            if how == "open":
                what = (f"opened {_shown(path)} for writing{saved} ({writes}): every rank writes "
                        "the same records into one file, duplicated and interleaved")
                fix = ("write it on one rank (`if dist.get_rank() == 0:` around the file or the "
                       "logger that writes it), or give each rank its own file name")
            else:
                what = (f"wrote {_shown(path)} with torch.save{saved} ({writes}): the writes race, "
                        "and a file interleaved with or cut by another rank's write fails to load")
                fix = ("save on one rank (`if dist.get_rank() == 0: torch.save(...)`, then "
                       "`dist.barrier()` before other ranks read the file), or give each rank its "
                       "own file name")
            finding = self.bus.report(
                self.code, f"{len(ranks)} ranks ({', '.join(map(str, ranks))}) on host {host} each "
                f"{what}", fix=fix, where=tuple(where))
            if finding is not None:
                finding.ranks = sorted(set(finding.ranks or []) | set(ranks))


def _helper_call(stack: Any, depth: int) -> Any:
    """The call of the function that writes (``save_checkpoint(...)`` in a trainer's
    ``validation()``), when that call is made past the frame shared with the training step:
    the guard belongs there, not at the shared frame's call of ``validation()``. None when the
    call is in the shared frame itself, or dispatches a callback (its own line is reported).
    ``depth``: the index in ``stack`` of the frame shared with the step."""
    if depth < 0 or len(stack) - 2 <= depth or dispatched(stack[-2][2]):
        return None
    return stack[-2][2]


def _writer_class(caller: Any) -> Any:
    """The class of the object whose method made the write from ``caller`` (``self``), when it
    is a user class and not a module; else None."""
    from torch import nn

    frame = user_frame(caller)
    code = frame.f_code if frame is not None else None
    if code is None or not code.co_argcount or code.co_varnames[0] != "self":
        return None
    cls = type(frame.f_locals.get("self"))
    return None if issubclass(cls, nn.Module) or not is_user_code(code) else cls


def _writer_built(cls: Any, stack: Any, step_stack: Any, depth: int) -> Any:
    """Where the object whose method wrote the file was built, when it is a writer of its own
    (a report manager, a metrics logger: ``cls``, a user class, not a module, none of whose
    methods runs the training step, not a callback reached through a dispatch loop) built at one
    place: every rank builds it, and the rank check belongs there (OpenNMT's
    ``build_report_manager``), also when it opened its file as it was built, before the first
    step. None otherwise."""
    if cls is None:
        return None
    own = {id(getattr(v, "__code__", None)) for v in vars(cls).values()}
    if any(id(entry[1]) in own for entry in step_stack):
        return None  # a trainer's own save: the guard belongs around the call
    if any(dispatched(entry[2]) for entry in stack[max(depth, 0):]):
        return None  # a callback the trainer dispatches to: the guard belongs in the hook
    return constructed_at([entry[2][0] for entry in stack], cls.__name__)


def _target(f: Any) -> str | None:
    """The real absolute path ``torch.save`` writes to, or None (a buffer, a descriptor)."""
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
    else:
        name = getattr(f, "name", None)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not isinstance(name, str) or not name:
        return None
    return os.path.realpath(name)


def _shown(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
