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
    # (pass number, len(loader), the DataLoader's own pass number: its epoch)
    assert [(p.number, p.length, p.epoch) for p in passes] == [(1, 4, 1), (2, 4, 2), (3, None, 1)]
    assert [p.iterator() for p in passes] == [first, second, stream]
    # the second pass of a DataLoader ends its first, which keeps the batches it gave
    assert [(p.ended, p.given) for p in passes] == [(True, 2), (False, 1), (False, 0)]


def test_a_pass_ends_when_its_iterator_is_released_and_keeps_what_it_gave():
    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3)  # 4 batches
    watcher = Watcher(checks=[SchedulerBeforeOptimizer]).start()
    ended = []
    watcher.state.pass_listeners.append(lambda p: ended.append((p.number, p.given)))
    try:
        for _ in loader:
            pass
        for i, _ in enumerate(loader):
            if i == 1:
                break
        passes = list(watcher.state.loader_passes)
    finally:
        watcher.stop()
    assert ended == [(1, 4), (2, 2)]
    assert [(p.ended, p.given, p.iterator()) for p in passes] == [(True, 4, None), (True, 2, None)]



def test_a_pass_whose_iterator_has_no_attributes_counts_no_batches():
    from trainguard.sanitize.core.passes import LoaderPass

    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3)
    generator = (batch for batch in loader)  # what a DataLoader subclass's __iter__ may return
    ended = []
    noted = LoaderPass(1, loader, 4, 1, generator, lambda: 7, [ended.append])
    assert (noted.given, noted.ended) == (0, False)
    del generator
    assert (noted.given, noted.ended, noted.step_at_end, ended) == (0, True, 7, [noted])
