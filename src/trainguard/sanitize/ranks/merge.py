"""Merging the findings of every rank into rank 0's report, and the tables it prints.

A finding is the same on two ranks when its code, path and line are: it is kept once, with the
message of the lowest rank that saw it, ``ranks`` the sorted ranks that saw it (or that a
cross-rank check named), and ``count`` the largest count of any one rank (the ranks run the same
code, so a sum would count each occurrence once per rank).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Iterable

from trainguard.findings import Finding

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["Missing", "merge_into", "merge_findings", "add_records", "rank_table", "missing_lines"]

_FIELDS = {f.name for f in fields(Finding)}


@dataclass
class Missing:
    """A rank whose report did not reach rank 0, and why."""

    rank: int
    reason: str


def merge_findings(by_rank: dict[int, list[dict[str, Any]]]) -> list[Finding]:
    """One list from each rank's ``Finding.to_dict()`` records, in rank order then first seen.

    Args:
        by_rank: rank -> that rank's findings as JSON data.

    Returns:
        the merged findings, each with ``ranks`` set.
    """
    merged: dict[tuple[str, str, int], Finding] = {}
    for rank in sorted(by_rank):
        add_records(None, merged, by_rank[rank], rank)
    return list(merged.values())


def merge_into(watcher: "Bus", by_rank: dict[int, list[dict[str, Any]]]) -> None:
    """Rank 0: add the other ranks' findings to ``watcher``'s, marking every finding's ranks."""
    by_place = {(f.code, f.path, f.line): f for f in watcher.findings}
    for finding in by_place.values():
        finding.ranks = sorted(set(finding.ranks or [0]))
    for rank in sorted(r for r in by_rank if r != 0):
        add_records(watcher, by_place, by_rank[rank], rank)


def add_records(watcher: "Bus | None", by_place: dict[tuple[str, str, int], Finding],
                records: list[dict[str, Any]], rank: int) -> list[tuple[str, str, int]]:
    """Join one process's ``Finding.to_dict()`` records into ``by_place`` (see the module doc),
    a finding at a new place also kept by ``watcher``; returns the records' places."""
    places = []
    for data in records:
        finding = Finding(**{k: v for k, v in data.items() if k in _FIELDS})
        place = (finding.code, finding.path, finding.line)
        places.append(place)
        ranks = set(finding.ranks or [rank])
        known = by_place.get(place)
        if known is None:
            finding.ranks = sorted(ranks)
            by_place[place] = finding
            if watcher is not None:
                watcher.keep(finding)
        else:
            known.ranks = sorted(set(known.ranks or []) | ranks)
            known.count = max(known.count, finding.count)
    return places


def rank_table(findings: Iterable[Finding], world_size: int, steps: int,
               reported: int | None = None) -> str:
    """The summary table with a ``ranks`` column; ``reported`` ranks of ``world_size`` sent a
    report (None on a rank that prints only its own findings)."""
    findings = list(findings)
    scope = (f"{reported} of {world_size} ranks reported" if reported is not None
             else f"this rank of {world_size}")
    if not findings:
        return (f"trainguard: no findings ({scope}; rank 0 watched {steps} optimizer steps)"
                if reported is not None else f"trainguard: no findings ({scope})")
    rows = [("count", "code", "name", "ranks", "where")]
    rows += [(str(f.count), f.code, f.name, ",".join(map(str, f.ranks or [])), f"{f.path}:{f.line}")
             for f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"trainguard: {len(findings)} finding{'s' if len(findings) != 1 else ''} ({scope})"]
    for r in rows:
        lines.append("  " + "  ".join([r[0].rjust(widths[0])]
                                     + [r[i].ljust(widths[i]) for i in (1, 2, 3)] + [r[4]]))
    return "\n".join(lines)


def missing_lines(missing: Iterable[Missing]) -> list[str]:
    """One line per rank whose report did not arrive."""
    return [f"trainguard: rank {m.rank} sent no report: {m.reason}" for m in missing]
