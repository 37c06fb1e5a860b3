"""Seeds that do not seed the run (inside ``torch.random.fork_rng``), and several datasets with a
copied generator iterated at one line (TG501, TG503)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from sanitize_helpers import run_in_process
from trainguard.sanitize.core.seeding import in_fork_rng
from trainguard.sanitize.watcher import watch

UNSEEDED_NUMPY = textwrap.dedent("""\
    import numpy as np
    import torch
    with torch.random.fork_rng({args}):
        torch.manual_seed(1234)
        x_val = torch.randn(4, 2)
    noise = np.random.normal(size=3)
""")


def _codes(tmp_path, text: str) -> list[tuple[str, int]]:
    path = tmp_path / "train.py"
    path.write_text(text)
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    return [(f.code, f.line) for f in watcher.findings]


@pytest.mark.parametrize("args, expected", [
    ("", []),  # the block restores torch's state: the seed neither asks nor seeds
    ("enabled=False", [("TG501", 4)]),  # nothing forked: a real seed, numpy left unseeded
    ("devices=[], enabled=False", [("TG501", 4)]),
])
def test_a_seed_inside_fork_rng_does_not_seed_the_run(tmp_path, args, expected):
    assert _codes(tmp_path, UNSEEDED_NUMPY.format(args=args)) == expected


def test_fork_rng_depth_is_counted_and_unwound_on_errors():
    with watch(summary=False):
        assert not in_fork_rng()
        with torch.random.fork_rng():
            with torch.random.fork_rng(enabled=False):
                assert in_fork_rng()
            assert in_fork_rng()
        with pytest.raises(KeyError), torch.random.fork_rng():
            raise KeyError("x")
        assert not in_fork_rng()
        seed = torch.initial_seed()
        with torch.random.fork_rng():
            torch.manual_seed(99)
            assert torch.initial_seed() == 99
        assert torch.initial_seed() == seed  # the original's behaviour is kept


TWO_DATASETS = textwrap.dedent("""\
    import numpy as np
    import random
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Crops(Dataset):
        def __init__(self):
            self.rng = np.random.default_rng(0)
        def __len__(self):
            return 4
        def __getitem__(self, i):
            return float(self.rng.normal())

    class Flips(Dataset):
        def __init__(self):
            self.coin = random.Random(0)
        def __len__(self):
            return 4
        def __getitem__(self, i):
            return self.coin.random()

    if __name__ == "__main__":
        for dataset in (Crops(), Flips()):
            batches = list(DataLoader(dataset, batch_size=2, num_workers=2))
""")


def test_tg503_reports_each_generator_where_its_class_stores_it(tmp_path):
    path = tmp_path / "data.py"
    path.write_text(TWO_DATASETS)
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    found = sorted((f.code, f.line) for f in watcher.findings)
    assert found == [("TG503", 8), ("TG503", 16)]  # self.rng = ..., self.coin = ... in __init__
    crops = next(f for f in watcher.findings if f.line == 8)
    assert "a copy of Crops.rng (a numpy Generator made before" in crops.message
