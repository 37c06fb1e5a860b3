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


def _message(loop) -> str:
    """The TG405 message of ``loop()`` run under a watcher with TG405 alone."""
    torch.manual_seed(4)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[NonFiniteLoss]).start()
    try:
        loop()
    finally:
        watcher.stop()
    assert [f.code for f in watcher.findings] == ["TG405"]
    return watcher.findings[0].message


class _Masked(nn.Module):
    """Attention pooling; a row masked out entirely gives softmax NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.head = nn.Linear(4, 1)

    def forward(self, x, mask=None):
        s = self.score(x).squeeze(-1)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return self.head((s.softmax(-1).unsqueeze(-1) * x).sum(1))


def test_the_rerun_passes_the_calls_keyword_arguments():
    # Re-run without mask=..., the forward is finite and the loss would be blamed.
    model = _Masked()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def loop():
        for step in range(12):
            mask = torch.ones(8, 5, dtype=torch.bool)
            if step == 11:
                mask[2] = False
            optimizer.zero_grad()
            model(torch.randn(8, 5, 4), mask=mask).pow(2).mean().backward()
            optimizer.step()

    message = _message(loop)
    assert "re-running _Masked's forward" in message and "is `head` (Linear)" in message, message


def test_of_two_calls_in_one_loss_the_one_that_made_the_nan_is_named():
    # Two views through one model: the later call is finite, the earlier one is not (softplus of
    # a large negative value is 0, and its log -inf).
    model = nn.Sequential(nn.Linear(4, 4), nn.Softplus(), _Log(), nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def loop():
        for step in range(12):
            x = torch.rand(8, 4) + 0.5
            bad = x.clone()
            if step == 11:
                bad[0] = -1e4
            optimizer.zero_grad()
            z1, z2 = model(bad), model(x)
            ((z1 - z2) ** 2).mean().backward()
            optimizer.step()

    message = _message(loop)
    assert "at optimizer step 12 " in message
    assert "is `2` (_Log)" in message, message
    assert "was finite" not in message


def test_a_nan_input_made_by_another_model_is_traced_to_that_model():
    encoder = nn.Sequential(nn.Linear(4, 4), nn.Softplus(), _Log())
    decoder = nn.Linear(4, 1)
    optimizer = torch.optim.SGD([*encoder.parameters(), *decoder.parameters()], lr=1e-3)

    def loop():
        for step in range(12):
            x = torch.rand(8, 4) + 0.5
            if step == 11:
                x[0] = -1e4
            optimizer.zero_grad()
            z = encoder(x)
            decoder(z).mean().backward()
            optimizer.step()

    message = _message(loop)
    assert "at optimizer step 12 " in message
    assert "the input batch given to Linear" in message
    assert "it is Sequential's output at test_tg405_rerun.py:" in message
    assert "re-running Sequential's forward" in message and "is `2` (_Log)" in message, message


def test_a_detached_generator_output_is_traced_to_the_generator():
    generator = nn.Sequential(nn.Linear(4, 4), nn.Softplus(), _Log())
    critic = nn.Linear(4, 1)
    opt_g = torch.optim.SGD(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.SGD(critic.parameters(), lr=1e-3)

    def loop():
        for step in range(12):
            z = torch.rand(8, 4) + 0.5
            if step == 11:
                z[0] = -1e4
            fake = generator(z)
            opt_d.zero_grad()
            critic(fake.detach()).mean().backward()  # the first non-finite loss: D's
            opt_d.step()
            opt_g.zero_grad()
            (-critic(fake).mean()).backward()
            opt_g.step()

    message = _message(loop)
    assert "at optimizer step 23 " in message  # (both optimizers' steps are counted)
    assert "it is Sequential's output at test_tg405_rerun.py:" in message and ", detached" in message
    assert "is `2` (_Log)" in message, message
