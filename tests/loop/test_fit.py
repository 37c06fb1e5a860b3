"""fit: mode and grad state seen by the model, accumulation, metrics, schedulers, arguments."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainguard.errors import UsageError
from trainguard.loop.fit import evaluate, fit


def _data(n=64, d=6, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = torch.randint(0, k, (n,), generator=g)
    return TensorDataset(x, y)


class Probe(nn.Module):
    """Records (training, grad_enabled) at every forward and keeps the outputs it returned."""

    def __init__(self, d=6, k=3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 16), nn.Dropout(0.2), nn.ReLU(), nn.Linear(16, k))
        self.seen: list[tuple[bool, bool]] = []
        self.outputs: list[torch.Tensor] = []

    def forward(self, x):
        self.seen.append((self.training, torch.is_grad_enabled()))
        out = self.net(x)
        self.outputs.append(out)
        return out


def test_training_forwards_in_train_mode_with_grad_and_validation_in_eval_without():
    model = Probe()
    train = DataLoader(_data(64), batch_size=16)
    val = DataLoader(_data(32, seed=1), batch_size=16)
    fit(model, train, val, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
        epochs=2, device="cpu", progress="none")
    # per epoch: 4 training forwards then 2 validation forwards
    expected = ([(True, True)] * 4 + [(False, False)] * 2) * 2
    assert model.seen == expected
    val_outputs = model.outputs[4:6] + model.outputs[10:12]
    assert all(o.grad_fn is None and not o.requires_grad for o in val_outputs)
    assert all(o.grad_fn is not None for o in model.outputs[:4])
    assert model.training  # left in train mode, as it was


def test_evaluate_restores_the_previous_mode():
    model = Probe()
    model.eval()
    evaluate(model, DataLoader(_data(8), batch_size=4), nn.CrossEntropyLoss(), device="cpu")
    assert not model.training
    model.train()
    out = evaluate(model, DataLoader(_data(8), batch_size=4), nn.CrossEntropyLoss(),
                   device="cpu")
    assert model.training and set(out) == {"loss", "accuracy"}


def _one_step_weights(batch_sizes, accumulate, data):
    """Weights after one epoch of plain SGD with the given batch boundaries."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    batches, start = [], 0
    for b in batch_sizes:
        batches.append((data.tensors[0][start:start + b].double(), data.tensors[1][start:start + b]))
        start += b
    fit(model, batches, None, torch.optim.SGD(model.parameters(), lr=0.5), nn.CrossEntropyLoss(),
        epochs=1, device="cpu", accumulate_grad_batches=accumulate, progress="none")
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("micro", [[8, 8, 8, 8], [10, 10, 10, 2], [5, 20, 7]])
def test_accumulation_equals_the_large_batch_gradient(micro):
    data = _data(sum(micro))
    big = _one_step_weights([sum(micro)], 1, data)
    accumulated = _one_step_weights(micro, len(micro), data)
    for a, b in zip(big, accumulated):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_a_last_partial_group_still_steps_with_its_own_weights():
    # 5 micro-batches with accumulate=2: groups [a, b], [c, d], [e] -> 3 optimizer steps
    data = _data(40)
    sizes = [8, 8, 8, 8, 8]
    torch.manual_seed(0)
    steps = []
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.register_step_post_hook(lambda *a: steps.append(1))
    batches = [(data.tensors[0][i:i + 8], data.tensors[1][i:i + 8]) for i in range(0, 40, 8)]
    history = fit(model, batches, None, opt, nn.CrossEntropyLoss(), epochs=1, device="cpu",
                  accumulate_grad_batches=2, progress="none")
    assert len(steps) == 3 and history.step == 3 and len(sizes) == 5


def test_each_step_sees_only_its_own_batch_gradient():
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # weights stay put: gradients comparable
    grads_at_step = []
    opt.register_step_pre_hook(lambda o, a, k: grads_at_step.append(model.weight.grad.clone()))
    data = _data(32)
    batches = [(data.tensors[0][i:i + 16], data.tensors[1][i:i + 16]) for i in (0, 16)]
    expected = []
    for x, y in batches:
        model.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        expected.append(model.weight.grad.clone())
    fit(model, batches, None, opt, nn.CrossEntropyLoss(), epochs=1, device="cpu",
        progress="none")
    assert len(grads_at_step) == 2
    for got, want in zip(grads_at_step, expected):
        torch.testing.assert_close(got, want)  # not g1 + g2: zero_grad ran before the step
    assert model.weight.grad is not None


def test_history_metrics_match_a_hand_computed_validation_pass():
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    val_data = _data(30, seed=3)
    val = DataLoader(val_data, batch_size=7)  # uneven last batch: sample weighting matters
    mae = {"mae": lambda out, y: (out.argmax(1) - y).abs().float().mean()}
    history = fit(model, DataLoader(_data(32), batch_size=8), val,
                  torch.optim.SGD(model.parameters(), lr=0.0), nn.CrossEntropyLoss(), epochs=1,
                  device="cpu", metrics=mae, progress="none")
    with torch.no_grad():
        out = model(val_data.tensors[0])
        y = val_data.tensors[1]
        loss = nn.functional.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).float().mean().item()
        mae_ref = (out.argmax(1) - y).abs().float().mean().item()
    row = history.rows[0]
    assert row["val_loss"] == pytest.approx(loss, rel=1e-5)
    assert row["val_accuracy"] == pytest.approx(acc, rel=1e-6)
    assert row["val_mae"] == pytest.approx(mae_ref, rel=1e-6)
    assert history["val_accuracy"] == [row["val_accuracy"]]


def test_train_loss_is_the_sample_weighted_mean_of_batch_losses():
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    data = _data(20)
    batches = [(data.tensors[0][:16], data.tensors[1][:16]),
               (data.tensors[0][16:], data.tensors[1][16:])]
    with torch.no_grad():
        l1 = nn.functional.cross_entropy(model(batches[0][0]), batches[0][1]).item()
        l2 = nn.functional.cross_entropy(model(batches[1][0]), batches[1][1]).item()
    h = fit(model, batches, None, torch.optim.SGD(model.parameters(), lr=0.0),
            nn.CrossEntropyLoss(), epochs=1, device="cpu", progress="none")
    assert h.rows[0]["train_loss"] == pytest.approx((16 * l1 + 4 * l2) / 20, rel=1e-6)


@pytest.mark.parametrize("interval,expected_lrs", [
    ("epoch", [1.0, 0.5, 0.25]),
    ("step", [1.0, 0.25, 0.0625]),  # 2 steps per epoch, gamma 0.5 per step
])
def test_scheduler_interval(interval, expected_lrs):
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    h = fit(model, DataLoader(_data(32), batch_size=16), None, opt, nn.CrossEntropyLoss(),
            epochs=3, device="cpu", scheduler=sched, scheduler_interval=interval,
            progress="none")
    assert h["lr"] == pytest.approx(expected_lrs)


def test_reduce_on_plateau_gets_the_monitored_value():
    seen = []

    class Spy(torch.optim.lr_scheduler.ReduceLROnPlateau):
        def step(self, metrics, *args, **kwargs):
            seen.append(metrics)
            return super().step(metrics, *args, **kwargs)

    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    h = fit(model, DataLoader(_data(16), batch_size=8), DataLoader(_data(8), batch_size=8), opt,
            nn.CrossEntropyLoss(), epochs=2, device="cpu", scheduler=Spy(opt), progress="none")
    assert seen == h["val_loss"]


@pytest.mark.parametrize("kwargs,needle", [
    ({"epochs": 0}, "epochs must be an int >= 1"),
    ({"accumulate_grad_batches": 0}, "accumulate_grad_batches"),
    ({"clip_grad_norm": -1.0}, "clip_grad_norm"),
    ({"precision": "16"}, "precision must be"),
    ({"precision": "fp16", "device": "cpu"}, "needs CUDA"),
    ({"scheduler_interval": "batch"}, "scheduler_interval"),
    ({"checkpoint_every_steps": 5}, "need a run_dir"),
    ({"device": "tpu:9"}, "--device"),
])
def test_bad_arguments_are_usage_errors(kwargs, needle):
    model = nn.Linear(6, 3)
    opts = {"epochs": 1, "device": "cpu", "progress": "none", **kwargs}
    with pytest.raises(UsageError, match=needle):
        fit(model, DataLoader(_data(8), batch_size=4), None,
            torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), **opts)


def test_not_an_optimizer_says_what_to_pass():
    model = nn.Linear(6, 3)
    with pytest.raises(UsageError, match="torch.optim.Optimizer"):
        fit(model, [], None, None, nn.CrossEntropyLoss(), device="cpu")


def test_batches_that_are_not_pairs_are_refused():
    model = nn.Linear(6, 3)
    with pytest.raises(UsageError, match=r"\(inputs, targets\)"):
        fit(model, [torch.randn(4, 6)], None, torch.optim.SGD(model.parameters(), lr=0.1),
            nn.CrossEntropyLoss(), device="cpu", progress="none")


def test_clipping_bounds_the_gradient_norm():
    model = nn.Linear(6, 3)
    norms = []
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.register_step_pre_hook(lambda o, a, k: norms.append(
        torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()))
    x = torch.randn(16, 6) * 100
    fit(model, [(x, torch.zeros(16, dtype=torch.long))], None, opt, nn.CrossEntropyLoss(),
        device="cpu", clip_grad_norm=0.01, progress="none")
    assert norms and norms[0] == pytest.approx(0.01, rel=1e-4)


def test_bf16_autocast_on_cpu_trains():
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    h = fit(model, DataLoader(_data(32), batch_size=8), DataLoader(_data(16), batch_size=8),
            torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), epochs=1,
            device="cpu", precision="bf16", progress="none")
    assert model.weight.dtype == torch.float32 and h.rows[0]["val_loss"] > 0


def test_deterministic_applies_during_the_run_and_is_undone_after():
    seen = []
    model = nn.Linear(6, 3)
    model.register_forward_hook(
        lambda *a: seen.append(torch.are_deterministic_algorithms_enabled()))
    assert not torch.are_deterministic_algorithms_enabled()
    fit(model, [(torch.randn(4, 6), torch.zeros(4, dtype=torch.long))], None,
        torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device="cpu",
        deterministic=True, progress="none")
    assert seen == [True] and not torch.are_deterministic_algorithms_enabled()
