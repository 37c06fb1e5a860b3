"""Loading is verified and safe: no code runs from a checkpoint, damage is caught."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainguard.ckpt.checkpoint import CheckpointManager, load_checkpoint, load_model_state
from trainguard.ckpt.io import atomic_save, verify_checkpoint
from trainguard.errors import CheckpointError


class Exploit:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))  # creating a file stands in for arbitrary code


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    target = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "trainguard-checkpoint", "model": Exploit(str(target))}, path)
    with pytest.raises(CheckpointError, match="refused to load"):
        load_checkpoint(path)
    assert not target.exists()


def test_a_plain_state_dict_is_not_a_trainguard_checkpoint(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save(nn.Linear(2, 2).state_dict(), path)
    with pytest.raises(CheckpointError, match="not a trainguard checkpoint"):
        load_checkpoint(path)


def test_every_flipped_byte_in_tensor_data_is_detected(tmp_path):
    path = tmp_path / "c.pt"
    atomic_save({"w": torch.arange(64, dtype=torch.float32)}, path)
    clean = path.read_bytes()
    start = clean.index(torch.arange(64, dtype=torch.float32).numpy().tobytes())
    for offset in range(start, start + 256, 17):
        data = bytearray(clean)
        data[offset] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match="CRC-32"):
            verify_checkpoint(path)
        # torch itself would have loaded the damaged tensor silently
        assert not torch.equal(torch.load(path, weights_only=True)["w"],
                               torch.arange(64, dtype=torch.float32))


def test_atomic_save_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "last.pt"
    atomic_save({"v": torch.ones(1)}, path)

    class Boom:
        def __reduce__(self):
            raise RuntimeError("cannot pickle")

    with pytest.raises(RuntimeError):
        atomic_save({"v": Boom()}, path)
    assert torch.load(path, weights_only=True)["v"].item() == 1.0
    assert not list(tmp_path.glob(".*tmp*"))


def test_manager_keeps_last_k_step_files_and_best(tmp_path):
    mgr = CheckpointManager(tmp_path, keep_last=2)
    for step in range(1, 5):
        mgr.save({"step": step, "epoch": 0, "batches_done": step}, step_file=True,
                 is_best=step == 2)
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == [
        "best.pt", "last.pt", "step-000000003.pt", "step-000000004.pt"]
    assert load_checkpoint(tmp_path / "best.pt")["step"] == 2
    assert load_checkpoint(tmp_path)["step"] == 4


def test_model_state_mismatch_lists_keys():
    small, big = nn.Linear(3, 2), nn.Sequential(nn.Linear(3, 4))
    with pytest.raises(CheckpointError) as err:
        load_model_state(big, small.state_dict(), source="ckpt.pt")
    msg = str(err.value)
    assert "missing from the checkpoint: 0.bias, 0.weight" in msg
    assert "not in the model: bias, weight" in msg
