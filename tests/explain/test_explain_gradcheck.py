"""gradcheck(): a planted backward error is reported at the right input and element."""

from __future__ import annotations

import pytest
import torch

import trainguard
from trainguard.errors import UsageError


def planted(element: int, amount: float):
    """x * y whose backward for x is off by ``amount`` at flat ``element``."""

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            grad_x = (grad * y).clone()
            grad_x.view(-1)[element] += amount * grad.reshape(-1)[element]
            return grad_x, grad * x

    return Mul.apply


def test_planted_error_is_found_at_its_element():
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(3, 4)  # float32: the check runs in float64
    report = trainguard.gradcheck(planted(6, 0.5), x, y)
    assert not report
    [mismatch] = report.mismatches
    assert (mismatch.index, mismatch.shape, mismatch.worst_input) == (0, (3, 4), (1, 2))
    assert mismatch.elements == [(1, 2)] and mismatch.count == 1
    assert "1 Jacobian entry disagrees" in str(report)
    assert mismatch.worst_output == 6
    assert mismatch.analytical - mismatch.numerical == pytest.approx(0.5, abs=1e-6)
    assert mismatch.abs_diff == pytest.approx(0.5, abs=1e-6)
    assert "input 0 (3, 4)" in str(report) and "(1, 2)" in str(report)
    assert report.to_dict()["mismatches"][0]["worst_input"] == [1, 2]


def test_error_in_second_input_names_input_1():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x @ w

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w.T, 2 * (x.T @ grad)  # the weight gradient is doubled

    torch.manual_seed(0)
    report = trainguard.gradcheck(Bad.apply, torch.randn(2, 3), torch.randn(3, 2))
    assert [m.index for m in report.mismatches] == [1]
    # d out[i, j] / d w[k, l] is x[i, k] when l == j: 4 outputs x 3 rows are nonzero, all doubled
    assert report.mismatches[0].count == 12
    assert report.mismatches[0].elements == [(k, l) for k in range(3) for l in range(2)]


def test_correct_function_passes_first_and_second_order():
    torch.manual_seed(0)
    report = trainguard.gradcheck(lambda x, w: torch.tanh(x @ w).sum(), torch.randn(2, 3),
                                  torch.randn(3, 2), check_grad_grad=True)
    assert report and report.ok and report.gradgrad_ok is True
    assert report.mismatches == []
    assert str(report).startswith("gradcheck: gradients match")


def test_only_inputs_requiring_grad_are_checked():
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    y = torch.randn(3, 4, requires_grad=True)  # the planted error is in x's gradient: unchecked
    assert trainguard.gradcheck(planted(0, 1.0), x, y)


def test_missing_double_backward_fails_gradgrad():
    class Once(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * grad

    report = trainguard.gradcheck(Once.apply, torch.randn(4), check_grad_grad=True)
    assert report.ok and report.gradgrad_ok is False and not report
    assert "gradgradcheck: FAILED" in str(report)


def test_no_float_input_is_a_usage_error():
    with pytest.raises(UsageError, match="no floating-point tensor"):
        trainguard.gradcheck(lambda n: n * 2, torch.arange(3))


def test_fn_that_raises_is_not_called_a_gradient_mismatch():
    model = torch.nn.Linear(3, 2)  # float32 weights: the float64 input cannot meet them
    report = trainguard.gradcheck(lambda x: model(x).sum(), torch.randn(2, 3))
    assert not report and report.crashed and report.mismatches == []
    assert str(report).startswith("gradcheck: could not run fn in float64: RuntimeError")
    assert "model.double()" in str(report)
    assert trainguard.gradcheck(lambda x: model.double()(x).sum(), torch.randn(2, 3))
