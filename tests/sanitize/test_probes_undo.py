"""Every probe owns its wrappers: what ``attach`` installs, its undo actions remove, exactly.

The snapshot is generic (every attribute of every imported ``torch``/``numpy`` module, of the
classes they define, of the descriptors on a module's class such as ``torch.backends.cudnn``'s
flags, the module-level hook registries, ``random``, ``warnings`` and the import machinery), so a
probe that starts to wrap something new without an undo action fails here without this test
naming it.
"""

from __future__ import annotations

import random
import sys
import warnings
from typing import Any

import pytest
import torch

from trainguard.config import Config
from trainguard.sanitize.probes import patch as patch_module
from trainguard.sanitize.watcher import PROBES, Watcher

_PREFIXES = ("torch", "numpy")


def _namespaces() -> dict[str, Any]:
    """name -> object whose attributes a probe could replace."""
    out: dict[str, Any] = {"random": random, "warnings": warnings,
                           "importlib._bootstrap": sys.modules["_frozen_importlib"]}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_PREFIXES):
            continue
        out[name] = module
        if type(module) is not type(sys):  # a module with its own class (cudnn's flags)
            out[f"{name}:class"] = type(module)
            for key, value in vars(type(module)).items():
                if hasattr(value, "__dict__") and not isinstance(value, type):
                    out[f"{name}:class.{key}"] = value
        for key, value in list(vars(module).items()):
            if issubclass(type(value), type) and value.__module__.startswith(_PREFIXES):
                out[f"{value.__module__}.{value.__qualname__}"] = value
    return out


def _snapshot() -> dict[tuple[str, str], Any]:
    """(namespace, attribute) -> the object there; for a dict named like a hook registry,
    its keys too."""
    out: dict[tuple[str, str], Any] = {}
    for name, obj in _namespaces().items():
        try:
            attrs = dict(vars(obj))
        except TypeError:
            continue
        for key, value in attrs.items():
            out[(name, key)] = value
            if issubclass(type(value), dict) and "hook" in key:
                out[(name, f"{key}[keys]")] = tuple(value)
    return out


# a counter of hook handles ever made, not an installed hook
_COUNTERS = {("torch.utils.hooks.RemovableHandle", "next_id")}


def _changed(before: dict, after: dict) -> set[tuple[str, str]]:
    keys = (set(before) | set(after)) - _COUNTERS
    return {k for k in keys if k not in before or k not in after or before[k] is not after[k]
            and not (isinstance(before[k], tuple) and before[k] == after[k])}


def _attach_once(probe: Any, watcher: Watcher) -> None:
    """Attach and undo ``probe`` once: the modules it imports are then imported before the
    snapshot is taken."""
    for action in reversed(probe.attach(watcher)):
        action()


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.__name__.rsplit(".", 1)[-1])
def test_each_probe_installs_something_and_its_undo_removes_all_of_it(probe):
    import numpy  # noqa: F401  (the repro probe wraps numpy.random's seeding)
    import torch.utils.data.distributed  # noqa: F401  (the data probe wraps DistributedSampler)

    watcher = Watcher(config=Config())  # every check: every probe has a listener
    _attach_once(probe, watcher)
    before = _snapshot()
    undo = probe.attach(watcher)
    try:
        installed = _changed(before, _snapshot())
        assert undo and all(callable(u) for u in undo)
        assert installed, f"{probe.__name__} installed nothing"
    finally:
        for action in reversed(undo):
            action()
    assert _changed(before, _snapshot()) == set()


def test_a_watcher_started_and_stopped_leaves_pytorch_as_it_was():
    import numpy  # noqa: F401
    import torch.utils.data.distributed  # noqa: F401

    Watcher(config=Config()).start().stop()  # (imports what the probes import)
    before = _snapshot()
    watcher = Watcher(config=Config()).start()
    assert _changed(before, _snapshot())
    watcher.stop()
    assert _changed(before, _snapshot()) == set()


def test_the_snapshot_sees_a_wrapper_left_behind():
    before = _snapshot()
    undo: list = []
    patch_module.patch(torch.nn.Module, "zero_grad", lambda orig: lambda *a, **k: orig(*a, **k),
                       undo)
    try:
        assert _changed(before, _snapshot()) == {("torch.nn.modules.module.Module", "zero_grad")}
    finally:
        undo[0]()
    assert _changed(before, _snapshot()) == set()
