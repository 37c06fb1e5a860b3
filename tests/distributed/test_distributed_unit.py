"""The pieces of ``loop/distributed.py``, ``ddp.py`` and ``collectives.py`` that need no second
process."""

from __future__ import annotations

import gc
import subprocess
import sys
import warnings
import weakref

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from cliutil import cli_env
from trainguard.data.loaders import make_loader
from trainguard.errors import UsageError
from trainguard.loop.distributed import SINGLE, Distributed, launch_env, setup


def _data(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32)[:, None], torch.zeros(n).long())


@pytest.mark.parametrize("env,needle", [
    ({"WORLD_SIZE": "two"}, "must be integers"),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2 is not in [0, WORLD_SIZE=2)"),
    ({"WORLD_SIZE": "0"}, "is not in"),
    ({"WORLD_SIZE": "2", "RANK": "-1"}, "RANK=-1"),
])
def test_malformed_launcher_variables_are_refused(monkeypatch, env, needle):
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(UsageError, match=needle.replace("[", r"\[").replace(")", r"\)")):
        launch_env()


def test_without_a_launcher_nothing_is_initialized_and_collectives_are_identities(monkeypatch):
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    d = setup(torch.device("cpu"))
    assert d is SINGLE and d.is_main and not d.enabled
    assert not torch.distributed.is_initialized()
    assert d.agreed_signal(15) == 15 and d.agreed_signal(None) is None
    assert d.mean(torch.tensor(6.0), 4) == 1.5
    assert d.gather({"a": 1}) == [{"a": 1}] and d.broadcast("x") == "x"
    assert d.rank_seed(123) == 123
    payload = {"rng": 1, "epoch_start_rng": None, "epoch_loss_sum": 0.0, "epoch_samples": 0}
    assert d.add_rank_states(dict(payload)) == payload  # single-process checkpoints unchanged
    model = nn.Linear(2, 2)
    assert d.wrap(model, torch.device("cpu"), sync_batchnorm=True) is model


def test_each_rank_takes_its_own_states_from_the_checkpoint():
    payload = {"rng": "r0", "epoch_samples": 8, "model": "m",
               "ranks": [{"rng": "r0", "epoch_samples": 8}, {"rng": "r1", "epoch_samples": 7}]}
    view = Distributed(rank=1, world_size=2, enabled=True).own_rank_view(payload)
    assert view["rng"] == "r1" and view["epoch_samples"] == 7 and view["model"] == "m"
    other_world = Distributed(rank=1, world_size=3, enabled=True).own_rank_view(payload)
    assert other_world["rng"] == "r0"  # resumed with force on another world size
    assert Distributed(rank=1, world_size=2, enabled=True).rank_seed(5) != 5


def test_sync_batchnorm_on_cpu_names_the_alternatives():
    d = Distributed(rank=0, world_size=2, enabled=True)
    with pytest.raises(UsageError, match="SyncBatchNorm refuses CPU tensors.*GroupNorm"):
        d.wrap(nn.BatchNorm1d(3), torch.device("cpu"), sync_batchnorm=True)


def test_an_unsharded_training_loader_is_warned_about():
    d = Distributed(rank=1, world_size=2, enabled=True)
    data = _data(10)
    with pytest.warns(UserWarning, match="every rank trains on the whole dataset"):
        d.check_sharded(DataLoader(data, batch_size=2, shuffle=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d.check_sharded(DataLoader(data, batch_size=2,
                                   sampler=DistributedSampler(data, num_replicas=2, rank=1)))
        d.check_sharded(make_loader(data, batch_size=2, train=True, seed=0, num_replicas=2,
                                    rank=1))


@pytest.mark.parametrize("n,world", [(10, 2), (11, 3), (2, 3)])
def test_evaluation_shards_cover_every_sample_once(n, world):
    seen = []
    for rank in range(world):
        if rank >= n:
            continue
        loader = make_loader(_data(n), batch_size=4, train=False, seed=0, num_replicas=world,
                             rank=rank)
        seen += [int(v) for inputs, _ in loader for v in inputs[:, 0]]
    assert sorted(seen) == list(range(n))


def test_training_shards_step_equally_often():
    lengths = {len(make_loader(_data(11), batch_size=2, train=True, seed=0, num_replicas=3,
                               rank=r)) for r in range(3)}
    assert lengths == {2}  # ceil(11 / 3) = 4 samples per rank, padded like DistributedSampler


def test_the_loops_collectives_reduce_tensors_that_live_as_long_as_the_process(monkeypatch):
    # a backend thread (gloo's worker, NCCL's watchdog) must never free them: at exit it could not
    # take the GIL and would abort the rank (see loop/collectives.py, _BUFFERS)
    reduced = []

    class Work:
        def wait(self) -> bool:
            return True

    def all_reduce(tensor, op=None, group=None, async_op=False):
        assert async_op  # the caller waits and keeps the work
        reduced.append(weakref.ref(tensor))
        return Work()

    monkeypatch.setattr(torch.distributed, "all_reduce", all_reduce)

    class Sums:
        sums, count = {"accuracy": 3.0, "loss": 2.0}, 4

    d = Distributed(rank=0, world_size=2, enabled=True)
    for _ in range(2):
        assert d.agreed_signal(None) is None and d.agreed_signal(15) == 15
        assert d.mean(torch.tensor(6.0), 4) == 1.5
        assert d.reduce_means(Sums(), torch.device("cpu")) == {"accuracy": 0.75, "loss": 0.5}
    gc.collect()
    assert len(reduced) == 8 and all(ref() is not None for ref in reduced)
    # one tensor per kind, reused by every call: nothing new for a backend thread to free
    assert len({id(ref()) for ref in reduced}) == 3


def test_the_exit_teardown_frees_cycles_while_the_process_group_is_alive(tmp_path):
    # A DDP model is a reference cycle: freed only by a full collection, which at exit would come
    # after destroy_process_group, during finalization, where a gloo thread aborts the rank
    # (pytorch/pytorch#179291). The teardown collects first.
    import torch.distributed as dist

    from trainguard.loop import distributed

    freed_while_initialized = []

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            freed_while_initialized.append(dist.is_initialized())

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        gc.disable()  # (no automatic collection between here and the teardown)
        Cycle()
        distributed._destroy()
    finally:
        gc.enable()
        if dist.is_initialized():
            dist.destroy_process_group()
    gc.collect()
    assert freed_while_initialized == [True]
    assert not dist.is_initialized()


# A fresh interpreter: the import order of torch.distributed.nn is what is under test.
EXIT_THREADS = """
import os, socket, sys
from torch import nn
from trainguard.loop import distributed

def gloo_threads():
    tasks = os.listdir("/proc/self/task")
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks]
    return sum(name.startswith("pt_gloo") for name in names)

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
distributed._init_process_group("gloo")
nn.parallel.DistributedDataParallel(nn.Linear(2, 2))  # imports torch.distributed.nn.functional
print("running", gloo_threads())
distributed._destroy()
print("after-exit-handler", gloo_threads())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads thread names from /proc")
def test_the_exit_handler_joins_gloo_threads_after_ddp_was_built():
    # torch.distributed.nn.functional binds the default group as a default argument when DDP first
    # imports it; left so, the group outlives destroy_process_group and gloo's worker threads are
    # joined during interpreter finalization, where they abort the rank (SIGABRT)
    proc = subprocess.run([sys.executable, "-c", EXIT_THREADS], env=cli_env(), text=True,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = dict(line.split() for line in proc.stdout.splitlines())
    assert int(counts["running"]) > 0  # the names this test counts are gloo's
    assert counts["after-exit-handler"] == "0"
