"""``weights_sha256``: one fingerprint of a model's weights that users can compare between runs."""

from __future__ import annotations

import hashlib
from typing import Mapping

import torch

__all__ = ["weights_sha256", "strip_wrapper_prefixes"]

_WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def strip_wrapper_prefixes(key: str) -> str:
    """Remove the prefixes that DDP (``module.``) and ``torch.compile`` (``_orig_mod.``) add."""
    changed = True
    while changed:
        changed = False
        for prefix in _WRAPPER_PREFIXES:
            if key.startswith(prefix):
                key, changed = key[len(prefix):], True
    return key


def weights_sha256(model_or_state: torch.nn.Module | Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over a ``state_dict`` (parameters and buffers), in key order.

    Each entry contributes its key (wrapper prefixes ``module.`` and ``_orig_mod.`` removed), its
    dtype, its shape and its raw bytes, so the same weights give the same hex digest whether or
    not the model was wrapped in DDP or compiled, on any device.

    Args:
        model_or_state: a module, or a ``state_dict``-like mapping of tensors.

    Returns:
        64 hexadecimal characters.

    Example::

        >>> import torch, trainguard
        >>> torch.manual_seed(0); m = torch.nn.Linear(2, 1)
        >>> len(trainguard.weights_sha256(m))
        64
    """
    state = model_or_state.state_dict() if isinstance(model_or_state, torch.nn.Module) \
        else model_or_state
    digest = hashlib.sha256()
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue
        tensor = value.detach().to("cpu").contiguous()
        digest.update(strip_wrapper_prefixes(key).encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(str(tuple(tensor.shape)).encode())
        # view as bytes so every dtype (bf16, bool, complex) hashes without a numpy round trip
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
                      if tensor.numel() else b"")
    return digest.hexdigest()
