"""TG201's message tells a held graph whose activations a backward freed from one that still holds
them (PyTorch FAQ: both accumulate history; only the second keeps the activations)."""

from __future__ import annotations

import torch

from trainguard.sanitize.core.holders import graphs_released


def _loss() -> torch.Tensor:
    w = torch.randn(3, 2, requires_grad=True)
    return (torch.randn(4, 3) @ w).sin().sum()


def test_a_graph_is_released_only_after_a_non_retaining_backward():
    loss = _loss()
    assert graphs_released(loss) is False
    loss.backward(retain_graph=True)
    assert graphs_released(loss) is False
    loss.backward()
    assert graphs_released(loss) is True


def test_containers_and_values_without_graphs():
    kept, freed = _loss(), _loss()
    freed.backward()
    assert graphs_released([kept]) is False
    assert graphs_released([freed, kept]) is True
    assert graphs_released(torch.ones(2)) is False
    assert graphs_released("not a tensor") is False
