"""The sanitizer in processes the script starts itself through ``torch.multiprocessing``.

A script that starts its ranks with ``mp.spawn(train, nprocs=2)`` (no ``torchrun``), or trains
one shared model in several ``mp.Process(target=train)`` (Hogwild), trains in processes that the
watcher of ``trainguard run`` does not run in. ``probes/children.py`` wraps the function each
child runs in a :class:`Child`: in the child it starts a watcher with the parent's configuration,
runs the function unchanged, and at its end writes the child's findings and the facts of the
cross-rank checks (TG602, TG604) to a file in a folder the parent made. At the end of the parent's
run, :class:`Family` reads them, merges them into the parent's findings (a finding seen in several
processes is kept once), runs the cross-rank checks over the children of each start call, and
names every child that sent nothing, with the reason.

The wrapper is a module-level class holding the user's function, so it pickles (``spawn``,
``forkserver``) whenever the function does; in a ``fork`` child it first removes the hooks the
child inherited from the parent's watcher. Nothing passes between the processes while they run
except files in that folder, so watching cannot block a child or reorder its collectives.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from trainguard.findings import Finding
from trainguard.sanitize.ranks.link import (DEFAULT_TIMEOUT_S, TIMEOUT_ENV, _collect_facts,
                                            _cross_rank_checks)
from trainguard.sanitize.ranks.merge import add_records

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["Child", "ChildLink", "Family", "attached", "unwatched_note", "unwatched_section"]

POLL_S = 0.05

# The watchers whose probes are installed in this process. A ``fork`` child inherits them with the
# parent's memory; its own watcher removes them first (``Watcher.detach``).
attached: list[Any] = []


@dataclass(frozen=True)
class Setup:
    """What a child's watcher needs from the parent (pickled with the wrapper)."""

    watcher: type  # the parent's watcher class (pickled by name)
    config: Any
    every_step: bool
    folder: str
    job: int
    world_size: int


class Child:
    """The user's process function, run under a watcher of its own in the child.

    Args:
        fn: the function the child runs (``mp.spawn``'s ``fn``, a ``Process``'s ``target``).
        setup: the parent's configuration and where the report goes.
        index: the child's index, or None when the first argument is it (``mp.spawn`` calls
            ``fn(i, *args)``).
    """

    def __init__(self, fn: Callable[..., Any], setup: Setup, index: int | None) -> None:
        self.fn, self.setup, self.index = fn, setup, index

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        index = self.index if self.index is not None else args[0]
        watcher = _start_watcher(self.setup, index)
        if watcher is None:
            return self.fn(*args, **kwargs)
        try:
            return self.fn(*args, **kwargs)
        except BaseException as exc:
            if not isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                watcher.explain(exc)
            raise
        finally:
            watcher.stop()  # ChildLink.finish writes the report
            if not watcher.ranks.sent:
                watcher.print_summary()
            # The user's garbage cycles (a DistributedDataParallel model is one) are freed now,
            # while the interpreter is alive: one left to the interpreter's exit frees its process
            # group there, and a gloo thread that then needs the GIL aborts the process
            # (https://github.com/pytorch/pytorch/pull/179291). Watching must not make that
            # likelier by moving the cycle to an older generation.
            gc.collect()


def _start_watcher(setup: Setup, index: int) -> Any:
    try:
        for bus in list(attached):  # a ``fork`` child: the parent's hooks, without its exit work
            bus.detach()
        attached.clear()
        link = ChildLink(rank=int(index), world_size=setup.world_size, folder=setup.folder,
                         job=setup.job)
        return setup.watcher(config=setup.config, every_step=setup.every_step, ranks=link).start()
    except Exception as exc:  # never in the way of the user's process: it runs unwatched
        print(f"trainguard: could not watch this child process: {type(exc).__name__}: {exc}",
              flush=True)
        return None


@dataclass
class ChildLink:
    """A child's line to its parent: the ``RankLink`` interface over files in a folder.

    Attributes:
        rank: the child's index (``mp.spawn``'s ``i``; ``Process`` children in start order).
        world_size: the children of its start call (1 for ``Process`` children).
        folder: the folder the parent reads.
        job: which start call of the parent's script started this child.
    """

    rank: int
    world_size: int
    folder: str
    job: int
    host: str = field(default_factory=socket.gethostname)
    sent: bool = False
    broken: str | None = None
    terminated: bool = False
    missing: list = field(default_factory=list)
    note: str | None = None

    @property
    def tag(self) -> str:
        return f"[child {self.rank}] "

    def attach(self) -> list[Callable[[], None]]:
        return []

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, f"{self.job}-" + key.replace("/", "-") + ".json")

    def put(self, key: str, value: Any) -> bool:
        """Write ``value`` as JSON under ``key`` (atomically); False when it could not."""
        path = self._path(key)
        try:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(value, f, separators=(",", ":"))
            os.replace(tmp, path)
            return True
        except OSError as exc:
            self.broken = f"could not write to {self.folder}: {exc}"
            return False

    def ready(self, keys: list[str]) -> list[Any] | None:
        """The values of ``keys`` when all are written now, else None (never waits)."""
        try:
            out = []
            for key in keys:
                with open(self._path(key), encoding="utf-8") as f:
                    out.append(json.load(f))
            return out
        except (OSError, ValueError):
            return None

    def finish(self, watcher: "Bus") -> None:
        mine = {"rank": self.rank, "host": self.host, "pid": os.getpid(),
                "steps": watcher.state.step, "facts": _collect_facts(watcher),
                "findings": [f.to_dict() for f in watcher.findings]}
        self.sent = self.put(f"report/{self.rank}", mine)

    def summary(self, watcher: "Bus") -> str:
        lines = [f"trainguard: child {self.rank}: could not send its report to the parent "
                 f"({self.broken}); its findings:"]
        lines += ["  " + f.format() for f in watcher.findings] or ["  none"]
        return "\n".join(lines)


@dataclass
class _Job:
    what: str  # "mp.spawn", "Process"
    where: Any  # the user's line that started it
    indices: list[int] = field(default_factory=list)
    processes: dict[int, Any] = field(default_factory=dict)  # index -> Process (when known)


class Family:
    """The parent's side: the children it started under a watcher, and their reports."""

    def __init__(self, bus: "Bus") -> None:
        self.bus = bus
        self.folder: str | None = None
        self.jobs: list[_Job] = []
        self.process_job: int | None = None  # the job of ``Process`` children
        self.reports: dict[tuple[int, int], dict] = {}
        self.missing: list[tuple[int, int, str]] = []  # (job, index, why)
        self.seen_in: dict[tuple[str, str, int], set[str]] = {}  # place -> processes

    def setup(self, job: int, world_size: int) -> Setup:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="trainguard-children-")
        return Setup(watcher=type(self.bus), config=self.bus.config, every_step=not self.bus.cadence.enabled,
                     folder=self.folder, job=job, world_size=world_size)

    def spawn_job(self, what: str, nprocs: int, where: Any) -> Setup:
        self.jobs.append(_Job(what, where, list(range(nprocs))))
        return self.setup(len(self.jobs) - 1, nprocs)

    def process_child(self, process: Any, where: Any) -> tuple[Setup, int]:
        if self.process_job is None:
            self.jobs.append(_Job("Process", where))
            self.process_job = len(self.jobs) - 1
        job = self.jobs[self.process_job]
        index = len(job.indices)
        job.indices.append(index)
        job.processes[index] = process
        return self.setup(self.process_job, 1), index

    @property
    def count(self) -> int:
        return sum(len(j.indices) for j in self.jobs)

    # ---- at the parent's exit ----------------------------------------------------------------
    def finish(self) -> None:
        """Read the children's reports (waiting for live non-daemon children, as Python's exit
        would), merge them, run the cross-rank checks per start call. Never raises."""
        if not self.jobs or self.folder is None:
            return
        try:
            self._gather()
            self._merge()
        except Exception as exc:
            self.bus.hook_failed("torch.multiprocessing children", exc)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _gather(self) -> None:
        timeout_s = _timeout()
        deadline = time.monotonic() + timeout_s
        waiting = {(j, i) for j, job in enumerate(self.jobs) for i in job.indices}
        while waiting:
            for j, i in sorted(waiting):
                path = os.path.join(self.folder, f"{j}-report-{i}.json")
                try:
                    with open(path, encoding="utf-8") as f:
                        self.reports[(j, i)] = json.load(f)
                    waiting.discard((j, i))
                except (OSError, ValueError):
                    pass
            live = [(j, i) for j, i in waiting if _may_still_report(self.jobs[j].processes.get(i))]
            if not live or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        for j, i in sorted(waiting):
            process = self.jobs[j].processes.get(i)
            if process is not None and process.is_alive():
                why = ("still running when the script ended" + ("" if process.daemon else
                       f" (waited {timeout_s:g} s; set {TIMEOUT_ENV} to wait longer)"))
            else:
                why = "it exited without a report: killed, os._exit() or a crash"
            self.missing.append((j, i, why))

    def _merge(self) -> None:
        by_place = {(f.code, f.path, f.line): f for f in self.bus.findings}
        self.seen_in = {place: {"main"} for place in by_place}
        for (j, i), report in sorted(self.reports.items()):  # (ranks: set from seen_in below)
            for place in add_records(self.bus, by_place, report.get("findings", []), i):
                self.seen_in.setdefault(place, set()).add(str(i))
        for j, job in enumerate(self.jobs):
            facts = {i: r.get("facts", {}) for (jj, i), r in self.reports.items() if jj == j}
            before = {(f.code, f.path, f.line) for f in self.bus.findings}
            _cross_rank_checks(self.bus, facts)
            for f in self.bus.findings:
                place = (f.code, f.path, f.line)
                if place not in before:
                    self.seen_in[place] = {str(r) for r in (f.ranks or [])}
        for f in self.bus.findings:
            children = sorted(int(p) for p in self.seen_in.get((f.code, f.path, f.line), ())
                              if p != "main")
            f.ranks = children or None

    # ---- output ------------------------------------------------------------------------------
    def where_seen(self, finding: Finding) -> str:
        """``main``, ``child 0,1`` or ``main, child 1``: the processes that saw ``finding``."""
        seen = self.seen_in.get((finding.code, finding.path, finding.line), {"main"})
        kids = sorted(int(p) for p in seen if p != "main")
        parts = (["main"] if "main" in seen else []) + (
            [f"child {','.join(map(str, kids))}"] if kids else [])
        return ", ".join(parts)

    def lines(self) -> list[str]:
        """What the summary adds: the children watched, their steps, the ones that sent nothing."""
        out = []
        for j, job in enumerate(self.jobs):
            got = [i for i in job.indices if (j, i) in self.reports]
            at = _at(job)
            steps = ", ".join(str(self.reports[(j, i)].get("steps", 0)) for i in got)
            out.append(f"trainguard: {len(got)} of {len(job.indices)} child processes started "
                       f"with {job.what}{at} watched"
                       + (f" (optimizer steps: {steps})" if got else ""))
        out += [f"trainguard: child {i} started with {self.jobs[j].what}{_at(self.jobs[j])} sent "
                f"no report: {why}" for j, i, why in self.missing]
        return out

    def report_section(self) -> list[dict[str, Any]]:
        """The ``children`` list of the JSON report: one object per child started."""
        out = []
        for j, job in enumerate(self.jobs):
            for i in job.indices:
                report = self.reports.get((j, i))
                why = next((w for jj, ii, w in self.missing if (jj, ii) == (j, i)), None)
                out.append({"started_with": job.what, "index": i,
                            "path": job.where[0] if job.where else None,
                            "line": job.where[1] if job.where else None,
                            "watched": report is not None,
                            "steps": report.get("steps") if report else None,
                            "missing": why})
        return out


def _at(job: _Job) -> str:
    return f" at {os.path.basename(job.where[0])}:{job.where[1]}" if job.where else ""


def _may_still_report(process: Any) -> bool:
    try:
        return process is not None and process.is_alive() and not process.daemon
    except (AssertionError, ValueError):  # not started by this process, or closed
        return False


def _timeout() -> float:
    try:
        value = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def unwatched_note(children: list[tuple[int, str, Any]]) -> str:
    """What the summary says of the child processes that could not be watched
    (``State.children``)."""
    count = sum(n for n, _, _ in children)
    if not count:
        return ""
    where = children[0][2]
    at = f" at {os.path.basename(where[0])}:{where[1]}" if where else ""
    return (f"; {count} child process{'es' if count != 1 else ''} started through "
            f"torch.multiprocessing{at} {'were' if count != 1 else 'was'} NOT watched "
            "(a Process subclass with its own run()): findings in them are not reported")


def unwatched_section(children: list[tuple[int, str, Any]]) -> list[dict[str, Any]]:
    """The ``unwatched_child_processes`` list of the JSON report."""
    return [{"count": n, "start_method": method,
             "path": where[0] if where else None, "line": where[1] if where else None}
            for n, method, where in children]
