"""Shared fixtures."""

from __future__ import annotations

import pytest

from cliutil import cli_env, run_cli  # noqa: F401  (re-exported for tests)

pytest_plugins = ["ctrl_c"]


@pytest.fixture
def cli():
    return run_cli
