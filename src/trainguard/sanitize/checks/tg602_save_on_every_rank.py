"""TG602 save-on-every-rank: several ranks write the same file with ``torch.save``.

What it watches: under ``torchrun``, and in the processes a watched script starts itself through
``torch.multiprocessing`` (``mp.spawn``, ``mp.Process``: ``ranks/children.py``), the target of every ``torch.save``: a path (``str`` or
``os.PathLike``) or an open file with a path ``name``, resolved to an absolute real path, with the
user's line and the number of writes (up to 256 distinct files per rank). At exit every rank sends
its list to rank 0.

When it fires: on rank 0 (the parent, for children), when the reports show two or more ranks on the same host writing the same
file. Their writes race: a checkpoint interleaved with or cut by another rank's write fails to load
("PytorchStreamReader failed reading zip archive", "storage has wrong size"). Reported once per
file at the save line of the lowest rank that wrote it, ``ranks`` the ranks that wrote it.

Silent on: saves guarded by a rank check (``if rank == 0``, a ``master_process`` flag, a helper
such as ``save_on_master``: one rank writes), per-rank file names (``f"rng_rank{rank}.pt"``),
``torch.save`` into memory (``io.BytesIO``), the distributed checkpoint API that every rank must
call (``torch.distributed.checkpoint.save`` writes one file per rank), a single process. The same
path on two hosts is not reported: on local disks those are two files (a shared filesystem makes
it a miss).

Cost: per ``torch.save`` under torchrun, one dict update (256 paths at most); at exit, the ranks'
lists merged on rank 0.

Reference: DDP tutorial, "Save and Load Checkpoints" (save from one process)
https://pytorch.org/tutorials/intermediate/ddp_tutorial.html#save-and-load-checkpoints; GitHub
DLLXW/baby-llama2-chinese#56 (both ranks save to one file, ``torch.load`` then fails)
https://github.com/DLLXW/baby-llama2-chinese/pull/56; NVIDIA/apex#629
https://github.com/NVIDIA/apex/issues/629.
"""

from __future__ import annotations

import os
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import user_location

_LIMIT = 256


class SaveOnEveryRank(Check):
    code = "TG602"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.saves: dict[str, list] = {}  # real path -> [user's (path, line, col), writes]

    def on_save(self, obj: Any, f: Any) -> None:
        if self.bus.ranks is None:
            return
        target = _target(f)
        if target is None:
            return
        known = self.saves.get(target)
        if known is not None:
            known[1] += 1
        elif len(self.saves) < _LIMIT:
            self.saves[target] = [list(user_location() or ("<unknown>", 0, 1)), 1]

    def rank_facts(self) -> Any:
        if not self.saves:
            return None
        return {"host": self.bus.ranks.host,
                "saves": [[path, where, n] for path, (where, n) in self.saves.items()]}

    def on_ranks(self, facts: dict[int, Any]) -> None:
        writers: dict[tuple[str, str], list[tuple[int, list, int]]] = {}
        for rank, fact in sorted(facts.items()):
            for path, where, n in fact.get("saves", []):
                writers.setdefault((fact.get("host", ""), path), []).append((rank, where, n))
        for (host, path), seen in writers.items():
            ranks = sorted({rank for rank, _, _ in seen})
            if len(ranks) < 2:
                continue
            writes = ", ".join(f"rank {rank}: {n}x" for rank, _, n in seen)
            finding = self.bus.report(
                self.code,
                f"{len(ranks)} ranks ({', '.join(map(str, ranks))}) on host {host} each wrote "
                f"{_shown(path)} with torch.save ({writes}): the writes race, and a file "
                "interleaved with or cut by another rank's write fails to load",
                fix="save on one rank (`if dist.get_rank() == 0: torch.save(...)`, then "
                    "`dist.barrier()` before other ranks read the file), or give each rank its own "
                    "file name",
                where=tuple(seen[0][1]))
            if finding is not None:
                finding.ranks = sorted(set(finding.ranks or []) | set(ranks))


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
