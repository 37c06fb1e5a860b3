"""core/singular_sites.py: the unguarded ops with a singular derivative in a loss's source."""

import textwrap

import pytest

from trainguard.sanitize.core.singular_sites import one_singular_site, singular_sites

pytest.importorskip("torch")


def _sites(tmp_path, body: str, line: int) -> list[tuple[int, str]]:
    path = tmp_path / "loss.py"
    path.write_text(textwrap.dedent(body))
    return [(at[1], op) for at, op in singular_sites([], (str(path), line, 1))]


@pytest.mark.parametrize("expr, op", [
    ("torch.sqrt(((a - b) ** 2).sum(-1))", "sqrt"),
    ("((a - b) ** 2).sum(-1).sqrt()", "sqrt"),
    ("torch.acos((a * b).sum(-1))", "acos"),
    ("((a - b) ** 2).sum(-1) ** 0.5", "** 0.5"),
    ("torch.rsqrt(a.pow(2).sum(-1))", "rsqrt"),
])
def test_an_unguarded_op_in_a_called_helper_is_listed(tmp_path, expr, op):
    body = f"""
    import torch

    def dist(a, b):
        return {expr}

    def train(a, b):
        loss = dist(a, b).mean()
        loss.backward()
    """
    assert _sites(tmp_path, body, 9) == [(5, op)]


@pytest.mark.parametrize("expr", [
    "torch.sqrt(((a - b) ** 2).sum(-1) + 1e-12)",
    "torch.sqrt(((a - b) ** 2).sum(-1).clamp(min=1e-12))",
    "torch.sqrt(((a - b) ** 2).sum(-1) + self_eps)",
    "torch.acos((a * b).sum(-1).clamp(-1 + 1e-6, 1 - 1e-6))",
    "math.sqrt(a.shape[-1]) * a.sum()",
    "np.sqrt(2.0) * a.sum()",
    "torch.norm(a - b, dim=-1)",
])
def test_guarded_ops_and_non_tensor_sqrt_are_not_listed(tmp_path, expr):
    body = f"""
    import math
    import numpy as np
    import torch

    def train(a, b, self_eps=1e-6):
        loss = ({expr}).mean()
        loss.backward()
    """
    assert _sites(tmp_path, body, 8) == []


def test_a_module_forward_and_a_function_held_in_its_attribute_are_read(tmp_path):
    import sys

    path = tmp_path / "triplet.py"
    path.write_text(textwrap.dedent("""
    import torch
    from torch import nn

    def euclidean(a, b):
        return torch.sqrt(((a - b) ** 2).sum(-1))

    class Triplet(nn.Module):
        def __init__(self, metric=euclidean):
            super().__init__()
            self.metric = metric

        def forward(self, a, p, n):
            return torch.relu(self.metric(a, p) - self.metric(a, n) + 1).mean()
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        import triplet
        found = singular_sites([triplet.Triplet()], None)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("triplet", None)
    assert [(at[1], op) for at, op in found] == [(6, "sqrt")]


@pytest.mark.parametrize("second, place", [
    ("(1 - p).log()", 5),  # p and its complement: one value, placed at the first
    ("torch.log(p)", 5),
    ("(1 - q).log()", None),  # two values: no one place
    ("(1 - p.detach()).log()", None),
])
def test_logs_of_one_value_count_as_one_site(tmp_path, second, place):
    path = tmp_path / "loss.py"
    path.write_text(textwrap.dedent(f"""
    import torch

    def nll(p, q, y):
        log_p = p.log()
        log_q = {second}
        return -torch.where(y, log_p, log_q).mean()

    def train(p, q, y):
        loss = nll(p, q, y)
        loss.backward()
    """))
    found = one_singular_site([], (str(path), 11, 1))
    assert (found[0][1] if found else None) == place
