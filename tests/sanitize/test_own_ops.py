"""The checks' own reads of the user's tensors do not reach the user's ``TorchDispatchMode``.

A script that counts the aten ops of one training step with a dispatch mode (the FLOP counter of
https://dev-discuss.pytorch.org/t/the-ideal-pytorch-flop-counter-with-torch-dispatch/505 is one)
must print the same counts under the sanitizer as without it.
"""

from __future__ import annotations

from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from trainguard.sanitize.watcher import Watcher


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def _counted_step() -> tuple[Counter, int]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    counter = OpCounter()
    with counter:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return counter.ops, torch._C._len_torch_dispatch_stack()


def test_a_users_op_counter_counts_the_same_ops_watched():
    plain, _ = _counted_step()
    watcher = Watcher(stream=None).start()
    try:
        watched, depth = _counted_step()
    finally:
        watcher.stop()
    assert watched == plain
    assert depth == 0  # (the counter left the stack; the sanitizer put nothing there)
    assert not [f for f in watcher.findings if f.code == "TG002"]
