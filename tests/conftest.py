"""Shared fixtures."""

from __future__ import annotations

import os
import sys

import pytest

from cliutil import cli_env, run_cli  # noqa: F401  (re-exported for tests)

# One intra-op thread in every test process, as cliutil.cli_env gives every CLI subprocess: the
# tests train tiny models, for which a second OpenMP thread only spins waiting for work (on a
# shared 2-core machine the fixed.py of a case took 5x the CPU time with two threads). Set before
# any test module imports torch; a value already in the environment is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported already (by a plugin): its pool is sized, resize it
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

pytest_plugins = ["ctrl_c"]


@pytest.fixture
def cli():
    return run_cli
