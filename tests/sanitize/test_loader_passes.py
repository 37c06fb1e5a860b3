"""The DataLoader wrapper notes each pass's iterator, so a check can read how many batches a pass
has given (``_num_yielded``) without a hook per batch."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from trainguard.sanitize.checks.tg305_scheduler_before_optimizer import SchedulerBeforeOptimizer
from trainguard.sanitize.watcher import Watcher


class _Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(6.0).view(6, 1))


def test_each_pass_is_noted_with_its_iterator_and_length():
    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3)  # 4 batches
    # (the wrapper is installed when a check listens to DataLoader passes, as TG305 does)
    watcher = Watcher(checks=[SchedulerBeforeOptimizer]).start()
    try:
        first = iter(loader)
        next(first), next(first)
        second = iter(loader)
        next(second)
        stream = iter(DataLoader(_Stream(), batch_size=2))
        passes = list(watcher.state.loader_passes)
    finally:
        watcher.stop()
    # (pass number, len(loader), whether that DataLoader had a pass before)
    assert [(n, length, again) for n, _, length, again in passes] == [
        (1, 4, False), (2, 4, True), (3, None, False)]
    assert [ref() for _, ref, _, _ in passes] == [first, second, stream]
    assert (first._num_yielded, second._num_yielded) == (2, 1)
