"""A torch-function mode the sanitizer enters leaves torch's mode stack when its work is done.

TG205's term trace closes at a ``backward()`` call, which torch dispatches through the mode itself
(while it runs the mode's ``__torch_function__``, torch holds the mode off the stack), so a plain
``__exit__`` there cannot pop it: it must leave at a later event, never stay for the rest of the
process (a Python call per torch op, in every later run of the same process).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from sanitize_helpers import CASES, run_in_process
from trainguard.sanitize.core.modestack import remove_mode
from trainguard.sanitize.watcher import Watcher


def _depth() -> int:
    return torch._C._len_torch_function_stack()


def test_term_trace_leaves_the_stack_during_the_run():
    depths = []
    watcher = Watcher(stream=None).start()
    try:
        torch.manual_seed(0)
        encoder, decoder = nn.Linear(6, 2), nn.Linear(2, 6)
        optimizer = torch.optim.SGD([*encoder.parameters(), *decoder.parameters()], lr=0.01)
        data = torch.randn(32, 6)
        for step in range(12):
            mu = encoder(data)
            loss = F.mse_loss(decoder(mu), data) + mu.detach().pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            depths.append(_depth())
    finally:
        watcher.stop()
    assert [(f.code, f.line) for f in watcher.findings][:1] == [
        ("TG205", test_term_trace_leaves_the_stack_during_the_run.__code__.co_firstlineno + 10)]
    assert max(depths) == 1  # the trace was on the stack for a cycle...
    assert depths[-1] == 0  # ...and left it at the first event after it closed
    assert _depth() == 0


def test_a_watched_script_leaves_no_mode_behind():
    watcher, status, _ = run_in_process(CASES / "tg205_kl_term_on_detached_mean" / "buggy.py")
    assert status == 0 and [f.code for f in watcher.findings] == ["TG205"]
    assert _depth() == 0


def test_remove_mode_keeps_the_modes_pushed_above_in_their_order():
    class Plain(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    ours, user_a, user_b = Plain(), Plain(), Plain()
    ours.__enter__()
    user_a.__enter__()
    user_b.__enter__()
    try:
        assert remove_mode(ours)
        assert [torch._C._get_function_stack_at(i) for i in range(_depth())] == [user_a, user_b]
        assert not remove_mode(ours)  # not on the stack: nothing changes
        assert _depth() == 2
    finally:
        user_b.__exit__(None, None, None)
        user_a.__exit__(None, None, None)
    assert _depth() == 0
