"""The stress scripts (``stress/``) under ``trainguard run``: each ends with the script's own exit
status, the same weights as ``python SCRIPT``, the findings its pitfalls call for and no TG002.

Slow (a plain and a watched process per script): run with ``python -m pytest -m slow``. What they
cost against ``python SCRIPT`` is measured by ``benchmarks/sanitizer_stress.py`` (a test asserts no
wall time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from cliutil import cli_env
from sanitize_helpers import STRESS

# script -> (exit status of `python SCRIPT`, of `trainguard run SCRIPT`, codes it must report)
EXPECTED = {
    "big_graphs": (0, 0, {"TG201", "TG203"}),  # losses kept with their graphs, retain_graph
    "generators_threads": (0, 0, set()),
    "hold_cycle": (0, 0, {"TG201"}),
    "hold_dicts": (0, 0, {"TG201"}),
    "inference_only": (0, 0, set()),
    "lbfgs_closure": (0, 0, set()),
    "long_run": (0, 0, set()),
    "manual_sgd": (0, 0, set()),
    "meta_device": (0, 0, set()),
    "nested_containers": (0, 0, {"TG201"}),
    "raise_in_forward": (0, 0, set()),
    "sigterm": (-15, -15, set()),  # both die of the signal (trainguard run after its report)
    "sys_exit": (4, 4, set()),
}
_HANG_GUARD_S = 600  # a run that never ends fails the test; each takes seconds


def test_every_stress_script_has_its_expectations():
    assert {p.stem for p in STRESS.glob("[!_]*.py")} == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_stress_script_ends_as_its_own_run_with_the_same_weights(name, tmp_path):
    plain_status, watched_status, codes = EXPECTED[name]
    script = str(STRESS / f"{name}.py")
    report = tmp_path / "report.json"
    runs = {"plain": [sys.executable, script],
            "watched": [sys.executable, "-m", "trainguard", "run", "--report", str(report),
                        script]}
    statuses = {}
    for side, cmd in runs.items():
        env = dict(cli_env(), STRESS_WEIGHTS=str(tmp_path / f"{side}.pt"), OMP_NUM_THREADS="1")
        proc = subprocess.run(cmd, cwd=STRESS, env=env, capture_output=True, text=True,
                              timeout=_HANG_GUARD_S)
        statuses[side] = (proc.returncode, proc.stderr[-2000:])
    assert statuses["plain"][0] == plain_status, statuses["plain"][1]
    assert statuses["watched"][0] == watched_status, statuses["watched"][1]
    found = {f["code"] for f in json.loads(report.read_text())["findings"]}
    assert found == codes, statuses["watched"][1]
    if os.path.exists(tmp_path / "plain.pt"):
        plain, watched = torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "watched.pt")
        assert plain.keys() == watched.keys()
        assert all(torch.equal(plain[k], watched[k]) for k in plain), name
