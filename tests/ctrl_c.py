"""A pytest plugin: one Ctrl-C stops the whole suite.

Tests run training scripts in this process (``trainguard run``'s runner, the CLI's ``main``); like
``python script.py`` they turn a KeyboardInterrupt inside the script into exit status 130, so
without this plugin pytest would record one failed test and go on. The plugin notes every SIGINT
and stops the session after the test that was running when it came.
"""

from __future__ import annotations

import signal

import pytest

_interrupted = False


def pytest_configure(config: pytest.Config) -> None:
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN or SIG_DFL: leave the process's own choice alone
        return

    def on_sigint(signum, frame):
        global _interrupted
        _interrupted = True
        previous(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if _interrupted:
        raise KeyboardInterrupt
