"""Shared by the stress scripts: where to save the trained weights (``STRESS_WEIGHTS``)."""

import os

import torch


def save(model: torch.nn.Module) -> None:
    """Save ``model``'s state_dict to ``$STRESS_WEIGHTS`` when it is set."""
    path = os.environ.get("STRESS_WEIGHTS")
    if path:
        torch.save(model.state_dict(), path)
