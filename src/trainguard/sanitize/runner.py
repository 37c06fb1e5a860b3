"""Run a script or module as ``python`` would, under the watcher.

``sys.argv``, ``sys.path[0]`` and ``__main__`` are what ``python script.py args`` or
``python -m pkg.mod args`` would give the script (``__file__`` absolute, ``sys.argv[0]`` as typed,
as CPython does since 3.9); its exit status is passed through: 0 when it
returns, its ``SystemExit`` code, 1 when it dies of an exception (after the traceback, which carries
any diagnosis), 130 when interrupted by SIGINT. A SIGTERM the script does not handle ends it through
``SystemExit(143)``, so the watcher can end and write its report; the caller then calls
:func:`die_of_pending_signal`, and the process dies of SIGTERM as ``python script.py`` would (its
parent sees the signal, not an exit status).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Literal

from trainguard.errors import UsageError

__all__ = ["die_of_pending_signal", "run_target"]


class _Terminated(SystemExit):
    """The SIGTERM that ended the script (it installed no handler of its own)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


_pending_signal: int | None = None  # the signal that ended the last run_target, until delivered


def die_of_pending_signal() -> None:
    """Die of the signal that ended the script, if one did: what ``python script.py`` does.

    Call it once the watcher's report is written. CPython does not catch SIGTERM, so an unhandled
    one kills ``python script.py`` (a parent sees ``-15``, a shell ``$?`` of 143); the runner turns
    it into ``SystemExit(143)`` instead, to end the watcher, and this restores the default action
    (``SIG_DFL``) and sends the signal again (https://docs.python.org/3/library/signal.html). It
    returns only when no signal is pending, or when the signal is blocked in this thread.
    """
    global _pending_signal
    signum, _pending_signal = _pending_signal, None
    if signum is None:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the script
            pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _trim(tb: TracebackType | None) -> TracebackType | None:
    """Drop the leading frames of runpy and trainguard, as ``python script.py`` would show."""
    from trainguard.sanitize.core.frames import is_user_file

    while tb is not None and not is_user_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _print_traceback(exc: BaseException) -> None:
    """Print ``exc`` as ``python`` would: without runpy's frames or trainguard's own wrappers."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    report = traceback.TracebackException(type(exc), exc, _trim(exc.__traceback__)
                                          or exc.__traceback__)
    for item in [report, *_chained(report)]:
        item.stack = traceback.StackSummary.from_list(
            [f for f in item.stack if not os.path.abspath(f.filename).startswith(here + os.sep)])
    print("".join(report.format()), end="", file=sys.stderr)


def _chained(report: traceback.TracebackException) -> list[traceback.TracebackException]:
    out, seen = [], set()
    current = report
    while True:
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if current is None or id(current) in seen:
            return out
        seen.add(id(current))
        out.append(current)


def _main_file(target: str) -> str:
    """The ``__file__`` CPython gives a script run as ``python target``: since Python 3.9 the
    current directory joined to the path as typed, not normalized (``./a.py`` gives
    ``/cwd/./a.py``) and symlinks kept (https://docs.python.org/3/whatsnew/3.9.html#other-language-changes).
    Its code objects carry the same name, so tracebacks and findings stay right after
    ``os.chdir``."""
    return target if os.path.isabs(target) else os.path.join(os.getcwd(), target)


def _run_file(path: str) -> None:
    """Run the file at ``path`` as ``__main__``, as ``python path`` does (a ``.ipynb``: its code
    cells in order, each under the name ``nb.ipynb[cell N]``). Not ``runpy.run_path``: it
    sets ``sys.argv[0]`` to the path it is given, whereas ``python`` keeps it as typed."""
    import builtins
    import io
    import types

    if path.endswith(".ipynb"):  # a notebook's code cells, in order (``trainguard/notebook.py``)
        from trainguard.notebook import compile_cells

        codes = compile_cells(path)
    else:
        with io.open_code(path) as f:
            source = f.read()
        codes = [compile(source, path, "exec", dont_inherit=True)]
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None,
                         __spec__=None, __builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main  # pickle and multiprocessing find the script's classes here
    try:
        for code in codes:
            exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _explain_handled(exc: SystemExit, status: int, on_error: "callable | None") -> int:
    """``sys.exit(1)`` in an ``except`` block: the script died of the error it was handling, so
    ``on_error`` explains it. Its traceback is not printed (the script printed its own
    message); the notes are. Returns ``status``."""
    handled = exc.__context__
    if not status or on_error is None or isinstance(exc, _Terminated) or \
            not isinstance(handled, Exception):
        return status
    before = len(getattr(handled, "__notes__", ()))
    on_error(handled)
    for note in getattr(handled, "__notes__", ())[before:]:
        print(note, file=sys.stderr)
    return status


def run_target(target: str, args: list[str], *, kind: Literal["path", "module"],
               on_error: "callable | None" = None,
               on_interrupt: Literal["status", "raise"] = "status") -> int:
    """Run ``target`` with ``args`` as its ``sys.argv[1:]``; returns its exit status.

    Args:
        target: a script path (``kind="path"``) or a dotted module name (``kind="module"``).
        args: the script's own arguments.
        kind: how to run it.
        on_error: called with the error the script dies of (notes; :func:`_explain_handled`).
        on_interrupt: what a ``KeyboardInterrupt`` (Ctrl-C) does: ``"status"`` returns 130, as
            ``python script.py`` exits; ``"raise"`` re-raises it, so that a caller running
            scripts in its own process (a test suite) stops at the first Ctrl-C.

    Raises:
        UsageError: the script does not exist or the module cannot be found.
    """
    global _pending_signal
    _pending_signal = None
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    if kind == "path":
        script = Path(target)
        if not script.is_file():
            raise UsageError(f"trainguard run: no such script {target!r} "
                             f"(give a .py file, or -m package.module)")
        sys.argv = [target, *args]
        sys.path.insert(0, str(script.resolve().parent))
        run_path = _main_file(target)
    else:
        import importlib.util

        sys.argv = [target, *args]
        sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:
            spec = None
            reason = f": {exc}"
        else:
            reason = ""
        if spec is None:
            sys.argv, _ = saved_argv, sys.path.pop(0)
            raise UsageError(f"trainguard run -m: no module named {target!r}{reason}")
    previous_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: object) -> None:
        raise _Terminated(signum)

    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        previous_term = None
    try:
        if kind == "path":
            _run_file(run_path)
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exc:
        if isinstance(exc, _Terminated):
            _pending_signal = exc.signum
        return _explain_handled(exc, _exit_status(exc.code), on_error)
    except KeyboardInterrupt:
        if on_interrupt == "raise":
            raise
        traceback.print_exception(KeyboardInterrupt, KeyboardInterrupt(), None)
        return 128 + signal.SIGINT
    except BaseException as exc:
        if on_error is not None:
            on_error(exc)
        _print_traceback(exc)
        return 1
    finally:
        sys.argv = saved_argv
        if sys.path and saved_path0 is not None and sys.path[0] != saved_path0:
            sys.path.pop(0)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
