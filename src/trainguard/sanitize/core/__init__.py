"""The sanitizer's core: what probes, checks and the rank merge share.

- ``bus.py``: :class:`~trainguard.sanitize.core.bus.Bus`, the only surface they see of the watcher;
- ``check.py``: :class:`~trainguard.sanitize.core.check.Check`, ``Diagnosis`` and the event names;
- ``records.py``: the records events carry; ``state.py``: the counters and graph tracking;
- ``cadence.py``: which calls the checks see once the loop has settled;
- ``frames.py``, ``bounds.py``, ``holders.py``, ``graph.py``, ``values.py``: locating the user's
  line, bounded walks (stack, graphs, containers, heap), reading tensor values;
- ``modes.py``, ``sites.py``, ``producer.py``, ``seeding.py``, ``replicas.py``,
  ``unreached.py``: facts several checks read (mode-dependent modules, where an output goes, what
  produced a tensor, seeding families, replica fingerprints, outputs no backward reached).

Nothing here imports a probe, a check, ``ranks/`` or the watcher.
"""
