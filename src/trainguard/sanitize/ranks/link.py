"""The sanitizer under ``torchrun``: each rank watches itself, rank 0 writes one merged report.

``torchrun --nproc-per-node 2 -m trainguard run train.py`` starts one watcher per rank. At exit
every rank sends its findings (and the facts a check gathers for the cross-rank checks, TG602 and
TG604) to rank 0, which merges them: a finding seen on several ranks at the same place is listed
once with ``ranks: [0, 1]``, and a rank that sent nothing is named, with the reason.

Communication never touches the user's process group and runs no collective, so it cannot hang
the job or reorder the user's collectives. It goes through the c10d key-value store:

- under ``torchrun`` (``TORCHELASTIC_USE_AGENT_STORE=True``) a client of the store that the
  launcher's agent hosts at ``MASTER_ADDR:MASTER_PORT``: it outlives every rank, so it works
  before the script calls ``init_process_group``, after ``destroy_process_group``, and when a rank
  has died;
- otherwise the default process group's store once the script has initialized it (captured before
  ``destroy_process_group`` runs), used with non-blocking calls only (``check`` before ``get``).

Keys live under ``trainguard/<run id>/<restart>/<watcher n>/``. Rank 0 waits at most
``TRAINGUARD_RANK_TIMEOUT_S`` seconds (default 20: under torchrun's 30 s between SIGTERM and
SIGKILL, so rank 0 still writes its report when the job is being torn down). A rank on rank 0's
host whose process is gone is not waited for. Any store error switches the exchange off; it never
reaches the user's script.

Reference: ``torch.distributed.TCPStore``/``PrefixStore``
(https://pytorch.org/docs/stable/distributed.html#torch.distributed.TCPStore) and torchrun's
worker environment (https://pytorch.org/docs/stable/elastic/run.html#environment-variables).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import signal
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from trainguard.sanitize.ranks.merge import Missing, merge_into, missing_lines, rank_table

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["RankLink", "exit_guard", "TIMEOUT_ENV", "DEFAULT_TIMEOUT_S"]

TIMEOUT_ENV = "TRAINGUARD_RANK_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 20.0
OP_TIMEOUT_S = 5.0  # a single store call on a store we own: connect, set, get
POLL_S = 0.05
_watchers_made = [0]  # watchers created in this process: the n in the key prefix


@dataclass
class RankLink:
    """This process's place in a ``torchrun`` job and its line to the other ranks.

    Attributes:
        rank: global rank (``RANK``).
        world_size: processes in the job (``WORLD_SIZE``, > 1).
        host: this host's name.
        timeout_s: how long rank 0 waits for the other ranks' reports at exit, in seconds.
        agent: the launcher's agent hosts the store (``TORCHELASTIC_USE_AGENT_STORE``).
        broken: why the exchange was switched off (a store error), or None.
        missing: after the merge on rank 0, the ranks that sent no report.
        steps: optimizer steps each rank watched (rank 0, after the merge).
        sent: a non-zero rank's report reached the store.
        terminated: a SIGTERM arrived while the watcher was ending (see :func:`exit_guard`).
        note: a remark for the summary (a malformed ``TRAINGUARD_RANK_TIMEOUT_S``).
        prefix: the store keys' prefix, ``trainguard/<run id>/<restart>/<watcher n>/``.
    """

    rank: int
    world_size: int
    host: str
    timeout_s: float
    agent: bool
    prefix: str
    broken: str | None = None
    missing: list[Missing] = field(default_factory=list)
    steps: dict[int, int] = field(default_factory=dict)
    sent: bool = False
    terminated: bool = False
    note: str | None = None
    _store: Any = field(default=None, repr=False)
    _hello_sent: bool = False

    @property
    def tag(self) -> str:
        """What this rank's findings are printed after."""
        return f"[rank {self.rank}] "

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "RankLink | None":
        """The link for this process, or None outside a multi-process launch (``WORLD_SIZE`` unset
        or 1, or malformed launcher variables: the watcher then works as in a single process)."""
        env = os.environ if environ is None else environ
        try:
            world = int(env.get("WORLD_SIZE", "1"))
            rank = int(env.get("RANK", "0"))
        except ValueError:
            return None
        if world < 2 or not 0 <= rank < world:
            return None
        timeout_s, note = DEFAULT_TIMEOUT_S, None
        raw = env.get(TIMEOUT_ENV)
        if raw is not None:
            try:
                timeout_s = float(raw)
                if not (timeout_s > 0 and math.isfinite(timeout_s)):
                    raise ValueError
            except ValueError:
                timeout_s = DEFAULT_TIMEOUT_S
                note = (f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds; waited "
                        f"{DEFAULT_TIMEOUT_S:g} s")
        _watchers_made[0] += 1
        run_id = env.get("TORCHELASTIC_RUN_ID", "none")
        restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
        return cls(rank=rank, world_size=world, host=socket.gethostname(), timeout_s=timeout_s,
                   agent=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
                   prefix=f"trainguard/{run_id}/{restart}/{_watchers_made[0]}/", note=note)

    def attach(self) -> list[Callable[[], None]]:
        """Connect (agent store) and say hello; without the agent's store, keep the default
        group's store before ``destroy_process_group`` drops it. Returns undo actions."""
        undo: list[Callable[[], None]] = []
        self.store()
        if not self.agent:
            import torch.distributed as dist

            if dist.is_available():
                original = dist.destroy_process_group

                @functools.wraps(original)
                def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
                    self.store()  # keep a reference: the store outlives the group for us
                    return original(*args, **kwargs)

                dist.destroy_process_group = destroy_process_group
                undo.append(lambda: setattr(dist, "destroy_process_group", original))
        return undo

    # ---- the store ---------------------------------------------------------------------------
    def store(self) -> Any:
        """The store under this job's prefix, or None (not reachable yet, or switched off)."""
        if self._store is not None or self.broken is not None:
            return self._store
        try:
            import torch.distributed as dist

            if not dist.is_available():
                self.broken = "torch.distributed is not available in this build of PyTorch"
                return None
            if self.agent:
                base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                     is_master=False, wait_for_workers=False,
                                     timeout=datetime.timedelta(seconds=OP_TIMEOUT_S))
            elif dist.is_initialized():
                base = dist.distributed_c10d._get_default_store()
            else:
                return None
            self._store = dist.PrefixStore(self.prefix, base)
        except Exception as exc:  # never let the exchange break the user's run
            self.broken = f"could not reach the c10d store: {type(exc).__name__}: {exc}"
            return None
        self._hello()
        return self._store

    def _call(self, what: Callable[[Any], Any]) -> Any:
        store = self.store()
        if store is None:
            return None
        try:
            return what(store)
        except Exception as exc:
            self.broken = f"the c10d store failed: {type(exc).__name__}: {exc}"
            self._store = None
            return None

    def put(self, key: str, value: Any) -> bool:
        """Store ``value`` (JSON-encoded) under ``key``; False when the store is unavailable."""
        data = json.dumps(value, separators=(",", ":"))
        return self._call(lambda s: s.set(key, data) or True) is True

    def ready(self, keys: list[str]) -> list[Any] | None:
        """The decoded values of ``keys`` when all are present now, else None (never waits)."""
        raw = self._call(lambda s: [s.get(k) for k in keys] if s.check(keys) else None)
        try:
            return None if raw is None else [json.loads(v) for v in raw]
        except ValueError:  # not written by this version of trainguard: ignore it
            return None

    def _hello(self) -> None:
        if self._hello_sent:
            return
        self._hello_sent = True
        self.put(f"hello/{self.rank}", {"host": self.host, "pid": os.getpid()})

    # ---- at exit -----------------------------------------------------------------------------
    def finish(self, watcher: "Bus") -> None:
        """Send this rank's report; on rank 0, gather the others', merge, run the cross-rank
        checks. Called by the watcher after ``on_exit``; never raises."""
        try:
            self._finish(watcher)
        except Exception as exc:  # malformed data from another rank: keep this rank's findings
            self.broken = f"the merge failed: {type(exc).__name__}: {exc}"

    def _finish(self, watcher: "Bus") -> None:
        for finding in watcher.findings:
            finding.ranks = finding.ranks or [self.rank]
        facts = _collect_facts(watcher)
        mine = {"rank": self.rank, "host": self.host, "pid": os.getpid(),
                "steps": watcher.state.step, "facts": facts,
                "findings": [f.to_dict() for f in watcher.findings]}
        if self.rank != 0:
            self.sent = self.put(f"report/{self.rank}", mine)
            if self.sent:
                self._call(lambda s: s.add("reported", 1))
            return
        reports = {0: mine, **self.gather()}
        self.steps = {r: int(rep.get("steps", 0)) for r, rep in reports.items()}
        merge_into(watcher, {r: rep.get("findings", []) for r, rep in reports.items()})
        _cross_rank_checks(watcher, {r: rep.get("facts", {}) for r, rep in reports.items()})

    def gather(self) -> dict[int, dict]:
        """Rank 0: the other ranks' reports, waiting at most ``timeout_s``; ranks that sent none
        are listed in ``self.missing``."""
        waiting = set(range(1, self.world_size))
        got: dict[int, dict] = {}
        if self.store() is None:
            why = self.broken or "the default process group was never initialized"
            self.missing = [Missing(r, f"no exchange between ranks ({why})") for r in sorted(waiting)]
            return got
        deadline = time.monotonic() + self.timeout_s
        seen_count, next_liveness = -1, 0.0
        gone: dict[int, str] = {}
        try:
            while waiting and self.broken is None and not self.terminated:
                count = self._call(lambda s: s.add("reported", 0))
                if count != seen_count:
                    seen_count = count
                    for r in sorted(waiting):
                        value = self.ready([f"report/{r}"])
                        if value is not None:
                            got[r] = value[0]
                            waiting.discard(r)
                now = time.monotonic()
                if waiting and now >= next_liveness:
                    next_liveness = now + 0.5
                    for r in sorted(waiting):
                        reason = self._gone(r)
                        if reason is not None and self.ready([f"report/{r}"]) is None:
                            gone[r] = reason
                            waiting.discard(r)
                if not waiting or now >= deadline:
                    break
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            self.terminated = True
        if self.terminated:
            # torchrun stops rank 0 because another rank exited: say so for a rank that is gone
            for r in sorted(waiting):
                gone[r] = (self._gone(r)
                           or "not waited for: rank 0 was asked to stop while waiting")
            waiting.clear()
        for r in sorted(waiting):
            gone[r] = (f"nothing arrived within {self.timeout_s:g} s (still running, hung, or gone "
                       f"on another host); set {TIMEOUT_ENV} to wait longer")
        if self.broken is not None:
            for r in sorted(waiting):
                gone[r] = self.broken
        self.missing = [Missing(r, gone[r]) for r in sorted(gone)]
        return got

    def _gone(self, rank: int) -> str | None:
        """Why ``rank`` will never report (its process on this host is gone), else None."""
        hello = self.ready([f"hello/{rank}"])
        if hello is None:
            return None
        host, pid = hello[0].get("host"), hello[0].get("pid")
        if host != self.host or not isinstance(pid, int) or not _process_gone(pid):
            return None
        return (f"its process ({pid} on {host}) exited first: killed, os._exit() or a crash; "
                "its findings are not in this report")

    # ---- output ------------------------------------------------------------------------------
    def summary(self, watcher: "Bus") -> str:
        """Rank 0: the merged table and the missing ranks; other ranks: a one-line note (or their
        own table when the report could not be sent)."""
        if self.rank != 0:
            n = len(watcher.findings)
            if self.sent:
                return (f"trainguard: rank {self.rank}: {n} finding{'s' if n != 1 else ''}, sent "
                        "to rank 0's merged report")
            return (f"trainguard: rank {self.rank}: could not send to rank 0 "
                    f"({self.broken or 'no store'}); this rank's findings:\n"
                    + rank_table(watcher.findings, self.world_size, watcher.state.step))
        lines = [rank_table(watcher.findings, self.world_size, watcher.state.step,
                            reported=self.world_size - len(self.missing))]
        lines += missing_lines(self.missing)
        if self.broken and not self.missing:
            lines.append(f"trainguard: the exchange between ranks stopped: {self.broken}")
        if self.note:
            lines.append(f"trainguard: {self.note}")
        return "\n".join(lines)

    def report_section(self) -> dict[str, Any]:
        """The ``ranks`` object of the JSON report (rank 0)."""
        return {"world_size": self.world_size,
                "reported": sorted(set(range(self.world_size)) - {m.rank for m in self.missing}),
                "steps": {str(r): n for r, n in sorted(self.steps.items())},
                "missing": [{"rank": m.rank, "reason": m.reason} for m in self.missing]}


def _collect_facts(watcher: "Bus") -> dict[str, Any]:
    from trainguard.sanitize.core.check import Check

    facts: dict[str, Any] = {}
    active = _active(watcher)
    for check in watcher.checks:
        if type(check).rank_facts is Check.rank_facts or id(check) not in active:
            continue
        try:
            value = check.rank_facts()
        except Exception as exc:
            watcher.check_failed(check, "rank_facts", exc)
            continue
        if value is not None:
            facts[check.code] = value
    return facts


def _cross_rank_checks(watcher: "Bus", facts: dict[int, dict[str, Any]]) -> None:
    from trainguard.sanitize.core.check import Check

    active = _active(watcher)
    for check in watcher.checks:
        if type(check).on_ranks is Check.on_ranks or id(check) not in active:
            continue
        try:
            check.on_ranks({r: f[check.code] for r, f in facts.items() if check.code in f})
        except Exception as exc:
            watcher.check_failed(check, "on_ranks", exc)


def _active(watcher: "Bus") -> set[int]:
    """Checks still switched on (a check that raised was removed from every event)."""
    return {id(check) for handlers in watcher.handlers.values() for check, _ in handlers}


def _process_gone(pid: int) -> bool:
    """True when no process ``pid`` runs on this host (absent, or a zombie not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


@contextmanager
def exit_guard(link: RankLink | None) -> Iterator[None]:
    """Hold SIGTERM while the watcher ends, merges and writes its report; deliver it afterwards.

    When a rank fails, torchrun's agent sends SIGTERM to the others and SIGKILL 30 s later; a
    SIGTERM that lands between the end of the script and the written report would lose it. Rank 0
    stops waiting for missing ranks at once when it arrives.
    """
    if link is None:
        yield
        return

    def note(signum: int, frame: Any) -> None:
        link.terminated = True

    try:
        previous = signal.signal(signal.SIGTERM, note)
    except (ValueError, OSError):  # not the main thread: nothing to hold
        yield
        return
    try:
        yield
    finally:
        # None: the previous handler was not installed from Python; the default is the closest
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if link.terminated:
            signal.raise_signal(signal.SIGTERM)
