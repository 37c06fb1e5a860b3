"""The sanitizer's own work is bounded (sanitize/bounds.py): walks end, read no values where
there are none, and a run finishes whatever its scripts hold.

Searches and scripts run in a thread started without ``threading`` (``_thread``), so the outermost
frame of its stack is user code (this file), as under a console script (``bin/trainguard``) or
``python -c``: a search that restarted from the innermost user frame on reaching the outermost one
never ended there. The thread has a time limit, so such a walk fails the test instead of hanging
the suite."""

from __future__ import annotations

import _thread
import gc
import os
import sysconfig
from pathlib import Path

from sanitize_helpers import STRESS, run_in_process

from trainguard.sanitize.core import frames
from trainguard.sanitize.core.holders import find_holder

_LIMIT_S = 300  # a hang guard, not a timing: each script runs in seconds


def _in_thread(target):
    """``target()``'s result, run in a thread whose outermost frame is this file's; AssertionError
    when it has not returned within the limit."""
    out: list = []
    done = _thread.allocate_lock()
    done.acquire()

    def bottom() -> None:  # the outermost frame of the thread's stack: user code
        try:
            out.append(target())
        finally:
            done.release()

    _thread.start_new_thread(bottom, ())
    assert done.acquire(timeout=_LIMIT_S), f"still running after {_LIMIT_S} s"
    assert out, "the thread raised (see the output above)"
    return out[0]


def _line_of(script: Path, text: str) -> int:
    return next(i for i, line in enumerate(script.read_text().splitlines(), 1) if text in line)


def test_the_holder_search_ends_at_the_outermost_frame():
    # nothing is ever old enough: every user frame is searched once, then the search ends
    assert _in_thread(lambda: find_holder(lambda stamps: False)) is None


def test_a_console_script_is_not_user_code(tmp_path):
    script = os.path.join(sysconfig.get_paths()["scripts"], "trainguard")
    assert not frames.is_user_file(script)
    assert frames.is_user_file(str(tmp_path / "train.py"))


def test_losses_kept_in_a_list_of_dicts_are_found_and_the_run_ends():
    script = STRESS / "hold_dicts.py"
    watcher, status, stderr = _in_thread(lambda: run_in_process(script))
    assert status == 0, stderr
    codes = [(f.code, f.line) for f in watcher.findings]
    assert codes == [("TG201", _line_of(script, "history.append("))], stderr
    assert "`history` holds them" in watcher.findings[0].message


def test_graphs_held_only_by_a_reference_cycle_are_reported_without_a_holder():
    script = STRESS / "hold_cycle.py"
    try:
        watcher, status, stderr = _in_thread(lambda: run_in_process(script))
    finally:
        gc.enable()  # the script turns the collector off while it trains
    assert status == 0, stderr
    found = {(f.code, f.line) for f in watcher.findings}
    assert found == {("TG201", _line_of(script, "Exp.apply(model(x))"))}, stderr
    assert "holds them" not in watcher.findings[0].message


def test_a_model_trained_on_the_meta_device_gives_no_finding():
    watcher, status, stderr = _in_thread(lambda: run_in_process(STRESS / "meta_device.py"))
    assert status == 0, stderr
    assert watcher.findings == [], stderr
