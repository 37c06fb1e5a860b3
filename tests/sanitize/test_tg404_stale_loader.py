"""TG404 names the DataLoader the run iterates, not another live one that leaves a batch of one.

A notebook (or a test process) may still hold a DataLoader from earlier work whose last batch
holds one sample; when the run's own loader ends with a partial batch that the script splits
further (over replicas), the finding must point at the run's loader.
"""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def test_a_stale_partial_loader_does_not_take_the_finding():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    # 129 samples in batches of 16: a last batch of one sample, never iterated by the script
    stale = DataLoader(TensorDataset(torch.zeros(129, 8)), batch_size=16)
    script = CASES / "tg404_last_batch_split_over_replicas" / "buggy.py"
    watcher, _, stderr = run_in_process(script)
    assert stale.batch_size == 16  # still alive while the script ran
    found = [(f.code, f.line) for f in watcher.findings]
    assert found == [("TG404", 15)], stderr
    assert "101 samples" in watcher.findings[0].message, stderr
