"""TG405's one-time re-run of a forward (to name the first non-finite module) must leave the run's
numbers unchanged: BatchNorm running statistics restored, Dropout's RNG draws forked away."""

from __future__ import annotations

import io

import torch
from torch import nn

from trainguard.config import Config
from trainguard.sanitize.checks.tg405_non_finite_loss import NonFiniteLoss
from trainguard.sanitize.watcher import Watcher


class _Log(nn.Module):
    def forward(self, x):
        return torch.log(x)  # NaN for the negative value of the poisoned batch


def _train() -> tuple[dict, torch.Tensor]:
    torch.manual_seed(21)
    model = nn.Sequential(_Log(), nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), nn.ReLU(),
                          nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(4):
        x = torch.rand(16, 4) + 0.1
        if step == 2:
            x[0, 0] = -1.0  # log gives NaN
        optimizer.zero_grad()
        loss = model(x).mean()
        loss.backward()
        optimizer.step()
    return {k: v.clone() for k, v in model.state_dict().items()}, torch.get_rng_state()


def test_rerun_changes_no_weight_buffer_or_rng_state():
    plain_state, plain_rng = _train()
    stream = io.StringIO()
    watcher = Watcher(config=Config(), stream=stream, checks=[NonFiniteLoss]).start()
    try:
        watched_state, watched_rng = _train()
    finally:
        watcher.stop()
    codes = [f.code for f in watcher.findings]
    assert codes == ["TG405"], stream.getvalue()
    assert "first module whose output is non-finite is `0` (_Log)" in watcher.findings[0].message
    assert torch.equal(plain_rng, watched_rng)
    for key, value in plain_state.items():
        assert torch.equal(value, watched_state[key]) or (
            value.isnan().any() and torch.equal(value.isnan(), watched_state[key].isnan())), key


def _settled_run(poison_at: int, tuple_output: bool) -> Watcher:
    """A loop that settles (every check installed), then a batch of step ``poison_at`` has a
    negative value that the model's first module turns into NaN."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.log = _Log()
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            out = self.head(self.log(x))
            return (out, out.detach()) if tuple_output else out

    torch.manual_seed(5)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    watcher = Watcher(config=Config(), stream=io.StringIO()).start()
    try:
        for step in range(poison_at + 1):
            x = torch.rand(16, 4) + 0.1
            if step == poison_at:
                x[0, 0] = -1.0
            optimizer.zero_grad()
            out = model(x)
            loss = (out[0] if tuple_output else out).mean()
            loss.backward()
            optimizer.step()
        assert watcher.cadence.steps_skipped > 0  # the poisoned step came after settled ones
    finally:
        watcher.stop()
    return watcher


def test_the_cause_is_named_on_a_settled_step_from_the_outputs_stamp():
    # step 30: settled after step 8, not a sampled step (those come 16 apart)
    findings = [f for f in _settled_run(30, False).findings if f.code == "TG405"]
    assert len(findings) == 1
    message = findings[0].message
    assert "at optimizer step 31" in message
    assert "re-running Net's forward" in message and "is `log` (_Log)" in message


def test_the_cause_is_named_for_a_model_that_returns_a_tuple():
    findings = [f for f in _settled_run(30, True).findings if f.code == "TG405"]
    assert len(findings) == 1
    assert "is `log` (_Log)" in findings[0].message, findings[0].message


def test_the_cause_is_named_when_the_loss_uses_an_output_that_carries_no_stamp():
    # Only the first four tensors of a tuple or dict output are stamped: a loss on the fifth head
    # is traced to the latest training forward instead.
    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.log = _Log()
            self.heads = nn.ModuleList(nn.Linear(4, 1) for _ in range(5))

        def forward(self, x):
            h = self.log(x)
            return {f"h{i}": head(h) for i, head in enumerate(self.heads)}

    torch.manual_seed(3)
    model = Heads()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[NonFiniteLoss]).start()
    try:
        for step in range(12):
            x = torch.rand(8, 4) + 0.1
            if step == 11:
                x[0, 0] = -1.0
            optimizer.zero_grad()
            loss = model(x)["h4"].mean()
            loss.backward()
            optimizer.step()
    finally:
        watcher.stop()
    assert [f.code for f in watcher.findings] == ["TG405"]
    assert "re-running Heads's forward" in watcher.findings[0].message
    assert "is `log` (_Log)" in watcher.findings[0].message
