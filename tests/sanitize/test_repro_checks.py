"""TG501-TG503 beyond the case folders: the seeding wrappers come off and change no number, the
seeding paths TG501 must tell apart, TG502's CUDA rule (without a GPU, with the device probe
replaced), and how TG503 reads datasets and worker_init_fn."""

from __future__ import annotations

import functools
import io
import random
import textwrap

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset, get_worker_info

from sanitize_helpers import run_in_process
from trainguard.config import Config
from trainguard.sanitize.checks import tg502_nondeterministic_algorithms as tg502
from trainguard.sanitize.checks.tg501_unseeded_run import UnseededRun
from trainguard.sanitize.checks.tg503_rng_copied_to_workers import RngCopiedToWorkers
from trainguard.sanitize.watcher import Watcher, watch


def _wrapped_names():
    cudnn_type = type(torch.backends.cudnn)
    return (random.seed, random.setstate, np.random.seed, np.random.set_state, torch.manual_seed,
            torch.random.manual_seed, torch.seed, torch.set_rng_state, torch.cuda.manual_seed,
            torch.cuda.manual_seed_all, torch.use_deterministic_algorithms,
            torch.set_deterministic_debug_mode, cudnn_type.__dict__["benchmark"].setter,
            cudnn_type.__dict__["deterministic"].setter, DataLoader.__iter__,
            torch.random.fork_rng)


def _draws():
    torch.manual_seed(5)
    random.seed(5)
    np.random.seed(5)
    return torch.rand(3).tolist(), random.random(), np.random.rand(2).tolist()


def test_wrappers_come_off_and_change_no_number():
    before, plain = _wrapped_names(), _draws()
    with watch(summary=False):
        assert all(a is not b for a, b in zip(_wrapped_names(), before))
        assert isinstance(torch.manual_seed(1), torch.Generator)
        assert _draws() == plain
    assert _wrapped_names() == before
    assert _draws() == plain


def _script(tmp_path, body: str):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(body))
    watcher, status, stderr = run_in_process(path)
    assert status == 0, stderr
    return [(f.code, f.line, f.message) for f in watcher.findings]


def test_tg501_torch_reseeded_from_the_os_is_unseeded(tmp_path):
    found = _script(tmp_path, """\
        import torch
        torch.manual_seed(0)
        torch.seed()
        weights = torch.randn(3)
    """)
    # at the reseed from the OS, the line to change (the seed at line 2 was undone there)
    assert [(c, line) for c, line, _ in found] == [("TG501", 3)]
    assert "torch's default CPU generator" in found[0][2]
    assert "by the end of the run" not in found[0][2] and "at the end of the run" in found[0][2]


def test_tg501_two_unseeded_generators_found_together_make_one_finding_naming_both(tmp_path):
    # torch seeded; shuffling with numpy and augmenting with random, neither seeded
    found = _script(tmp_path, """\
        import random
        import numpy as np
        import torch
        torch.manual_seed(42)
        order = np.random.permutation(10)
        scale = random.uniform(0.9, 1.1)
    """)
    assert [(c, line) for c, line, _ in found] == [("TG501", 4)]
    message = found[0][2]
    assert "numpy's global generator" in message and "Python's random module" in message, message
    assert "without seeding them" in message, message


def test_tg501_cuda_seed_alone_leaves_the_cpu_generator_unseeded(tmp_path):
    found = _script(tmp_path, """\
        import torch
        from torch import nn
        torch.cuda.manual_seed_all(0)
        model = nn.Linear(4, 2)
    """)
    assert [(c, line) for c, line, _ in found] == [("TG501", 3)]
    assert "asks to be reproducible (torch.cuda.manual_seed_all(0) here)" in found[0][2]


@pytest.mark.parametrize("restore", [
    "random.setstate(saved)",  # resuming restores the state from a checkpoint
    "random.seed(7)",
])
def test_tg501_restored_or_seeded_generator_is_silent(tmp_path, restore):
    assert _script(tmp_path, f"""\
        import random
        import torch
        saved = random.getstate()
        torch.manual_seed(0)
        {restore}
        random.shuffle(list(range(10)))
    """) == []


def test_tg501_seeding_the_default_generator_directly_counts_as_seeded(tmp_path):
    assert _script(tmp_path, """\
        import random
        import torch
        random.seed(0)
        torch.default_generator.manual_seed(12345)
        torch.randn(4)
    """) == []


def test_tg501_watch_block_presumes_earlier_seeding_but_sees_a_reseed_from_the_os():
    stream = io.StringIO()
    with watch(summary=False, stream=stream, select="TG501") as w:
        torch.manual_seed(0)
        np.random.rand(3)  # numpy may have been seeded before the block: silent
    assert w.findings == []
    with watch(summary=False, stream=stream, select="TG501") as w:
        torch.manual_seed(0)
        np.random.seed()  # from the OS, inside the block
        np.random.rand(3)
    assert [f.code for f in w.findings] == ["TG501"]
    assert "numpy's global generator" in w.findings[0].message


def _tg502_run(monkeypatch, build, *, cudnn_deterministic=False, algorithms=False):
    monkeypatch.setattr(tg502, "_on_cuda", lambda model: True)
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: algorithms)
    saved = torch.backends.cudnn.deterministic
    w = Watcher(config=Config(), stream=io.StringIO(),
                checks=[tg502.NondeterministicAlgorithms]).start()
    try:
        torch.manual_seed(0)
        torch.backends.cudnn.deterministic = cudnn_deterministic
        model = build()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(2, 1, 8, 8)).sum().backward()
        opt.step()
    finally:
        w.stop()
        torch.backends.cudnn.deterministic = saved
    return [f.message for f in w.findings]


def _conv_pool():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2, 1))


def test_tg502_cuda_model_with_nondeterministic_kernels(monkeypatch):
    # A seed alone does not ask for deterministic kernels (seeded runs that time kernels for
    # speed are common and deliberate).
    assert _tg502_run(monkeypatch, _conv_pool) == []
    (message,) = _tg502_run(monkeypatch, _conv_pool, cudnn_deterministic=True)
    assert "torch.backends.cudnn.deterministic = True" in message
    assert "runs AdaptiveAvgPool2d on CUDA" in message  # cudnn.deterministic covers convolutions
    assert _tg502_run(monkeypatch, _conv_pool, cudnn_deterministic=True, algorithms=True) == []


def test_tg502_cuda_model_of_deterministic_layers_is_silent(monkeypatch):
    def mlp():
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.LayerNorm(8), nn.ReLU(),
                             nn.Linear(8, 1))
    assert _tg502_run(monkeypatch, mlp) == []


class _Jitter(Dataset):
    def __init__(self, rng):
        self.rng = rng

    def __len__(self):
        return 4

    def _noise(self):
        return self.rng.random()

    def __getitem__(self, i):
        return float(i) + self._noise()


class _Stream(IterableDataset):
    def __init__(self):
        self.gen = torch.Generator().manual_seed(0)

    def __iter__(self):
        yield torch.rand(1, generator=self.gen)


class _PerItem(Dataset):
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __len__(self):
        return 4

    def __getitem__(self, i):
        self.rng = np.random.default_rng(i)  # rebuilt for every item
        return self.rng.random()


def _helper_reseed(info):
    info.dataset.rng = np.random.default_rng(info.seed)


def _init_via_helper(worker_id):
    _helper_reseed(get_worker_info())


def _init_globals_only(worker_id, offset):
    np.random.seed(worker_id + offset)


def _tg503(loader):
    w = Watcher(config=Config(), stream=io.StringIO(), checks=[RngCopiedToWorkers])
    w.emit("on_loader_iter", loader)  # what DataLoader.__iter__ sends; no worker is started
    return [f.message + " (fix: " + f.fix + ")" for f in w.findings]


@pytest.mark.parametrize("rng, kind", [
    (np.random.default_rng(0), "numpy Generator"),
    (np.random.RandomState(0), "numpy RandomState"),
    (random.Random(0), "random.Random"),
    (torch.Generator().manual_seed(0), "torch.Generator"),
])
def test_tg503_each_generator_kind_through_a_called_method(rng, kind):
    (message,) = _tg503(DataLoader(_Jitter(rng), num_workers=2))
    assert f"_Jitter.rng (a {kind}" in message and "num_workers=2" in message


@pytest.mark.parametrize("rng", [random.SystemRandom(), random._inst, np.random.mtrand._rand,
                                 torch.default_generator])
def test_tg503_generators_that_workers_do_not_copy_are_silent(rng):
    assert _tg503(DataLoader(_Jitter(rng), num_workers=2)) == []


def test_tg503_inside_subset_names_the_path_for_the_fix():
    (message,) = _tg503(DataLoader(Subset(_Jitter(random.Random(0)), [0, 1]), num_workers=2))
    assert "info.dataset.dataset.rng = random.Random(info.seed)" in message


def test_tg503_iterable_dataset_reads_iter():
    (message,) = _tg503(DataLoader(_Stream(), num_workers=2))
    assert "_Stream.__iter__ draws from it" in message


def test_tg503_worker_init_fn_that_reseeds_through_a_helper_is_silent():
    assert _tg503(DataLoader(_Jitter(np.random.default_rng(0)), num_workers=2,
                             worker_init_fn=_init_via_helper)) == []


def test_tg503_worker_init_fn_that_seeds_only_globals_is_named():
    init = functools.partial(_init_globals_only, offset=1)
    (message,) = _tg503(DataLoader(_Jitter(np.random.default_rng(0)), num_workers=2,
                                   worker_init_fn=init))
    assert "its worker_init_fn _init_globals_only does not reseed it" in message


def test_tg503_silent_without_workers_or_with_a_generator_rebuilt_per_item():
    assert _tg503(DataLoader(_Jitter(np.random.default_rng(0)), num_workers=0)) == []
    assert _tg503(DataLoader(_PerItem(), num_workers=2)) == []


def _seed_in_worker(worker_id):
    random.seed(worker_id)  # a seeding call in the worker process: no event there


def test_seeding_in_dataloader_workers_is_not_an_event(tmp_path):
    import os

    from trainguard.sanitize.checks import Check

    log = tmp_path / "events.txt"

    class Recorder(Check):
        code = "TG501"

        def on_repro(self, name, value):
            with open(log, "a") as f:
                f.write(f"{os.getpid()} {name}\n")

    w = Watcher(config=Config(), stream=io.StringIO(), checks=[Recorder]).start()
    try:
        random.seed(0)
        loader = DataLoader(list(range(8)), batch_size=2, num_workers=2,
                            worker_init_fn=_seed_in_worker)
        assert sorted(int(x) for batch in loader for x in batch) == list(range(8))
    finally:
        w.stop()
    assert log.read_text().splitlines() == [f"{os.getpid()} random.seed"]
