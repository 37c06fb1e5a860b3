"""TG503 on generators a Dataset holds through other objects: a transform defined in a helper
module, an ``nn.Module`` transform, and the ways of making or reseeding them per worker that stay
silent. Modelled on wolny/pytorch-3dunet#32 (https://github.com/wolny/pytorch-3dunet/issues/32):
RandomRotate/RandomContrast transforms each hold a seeded RandomState, "the angles ... in each
batch are the same" with several workers, and "work just fine" with num_workers=0."""

from __future__ import annotations

import textwrap

import pytest

from sanitize_helpers import run_in_process

AUGMENT = textwrap.dedent("""\
    import random

    import numpy as np
    import torch


    class RandomContrast:
        def __init__(self, seed=47):
            self.random_state = np.random.RandomState(seed)

        def __call__(self, patch):
            return patch * self.random_state.uniform(0.8, 1.2)


    class LazyJitter:
        def __init__(self):
            self.gen = None

        def __call__(self, patch):
            if self.gen is None:  # first use: in the worker
                self.gen = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
            return patch + torch.rand(patch.shape, generator=self.gen).numpy()


    class ModuleFlip(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnd = random.Random(3)

        def forward(self, patch):
            return patch[::-1].copy() if self.rnd.random() < 0.5 else patch
""")

TRAIN = textwrap.dedent("""\
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info

    from augment import LazyJitter, ModuleFlip, RandomContrast


    class Patches(Dataset):
        def __init__(self, transform):
            self.volumes = np.ones((8, 4))
            self.transform = transform

        def __len__(self):
            return len(self.volumes)

        def __getitem__(self, i):
            return torch.as_tensor(self.transform(self.volumes[i]), dtype=torch.float32)


    def reseed(worker_id):
        info = get_worker_info()
        info.dataset.transform.random_state = np.random.RandomState(info.seed % 2**32)


    loader = DataLoader(Patches({transform}), batch_size=2, num_workers={workers}{init})
    for batch in loader:
        pass
""")


@pytest.mark.parametrize("transform, workers, init, expected", [
    # a transform of a helper module (it serves other loaders too): at the DataLoader's line,
    # where the worker_init_fn goes; the message names the __init__ line that made it
    ("RandomContrast()", 2, "", [("train.py", 25)]),
    ("torch.nn.Sequential(ModuleFlip())", 2, "", [("train.py", 25)]),
    ("RandomContrast()", 0, "", []),  # no workers: one generator, one process
    ("RandomContrast()", 2, ", worker_init_fn=reseed", []),  # reseeded in every worker
    ("LazyJitter()", 2, "", []),  # made in the worker from its own seed
])
def test_generators_held_by_a_transform(tmp_path, transform, workers, init, expected):
    (tmp_path / "augment.py").write_text(AUGMENT)
    script = tmp_path / "train.py"
    script.write_text(TRAIN.format(transform=transform, workers=workers, init=init))
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    assert [(f.path.rsplit("/", 1)[-1], f.line) for f in watcher.findings] == expected, stderr
    for finding in watcher.findings:
        assert "all 2 workers draw the same numbers" in finding.message
        assert "(made at augment.py:" in finding.message
