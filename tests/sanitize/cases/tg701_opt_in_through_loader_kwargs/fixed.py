# Modelled on ecmwf/anemoi-core#1416 (https://github.com/ecmwf/anemoi-core/issues/1416), whose
# suggested fix is to load with weights_only=True and "fall back to weights_only=False only on
# explicit opt-in for legacy checkpoints": the loader hands its keyword arguments on to
# torch.load, so the opt-in is the caller's. Here a fine-tuning script opts in for a published
# checkpoint whose pickle carries a payload, which then runs: the line to change is the script's
# call, not the loader's torch.load. Fixed twin: the script asks for weights_only=True.
import pickle
import tempfile
from pathlib import Path

import torch
from torch import nn


class _Payload:
    def __reduce__(self):
        return (exec, ("pass",))


def publish(folder: Path) -> Path:
    path = folder / "coco_pretrain.pth"
    torch.save({"model": nn.Linear(4, 3).state_dict(), "args": _Payload()}, path)
    return path


def load_pretrain(path, **torch_load_kwargs):
    try:
        return torch.load(path, map_location="cpu", **torch_load_kwargs)
    except pickle.UnpicklingError as err:
        print("refused:", str(err).splitlines()[0])
        return None


detector = nn.Linear(4, 3)
checkpoint = load_pretrain(publish(Path(tempfile.mkdtemp())), weights_only=True)
if checkpoint is not None:
    detector.load_state_dict(checkpoint["model"])
