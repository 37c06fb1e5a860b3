# Modelled on kyutai-labs/moshi#408 (https://github.com/kyutai-labs/moshi/pull/408): a weight
# conversion script reads a user-supplied checkpoint with torch.load(..., weights_only=False), so
# whatever the pickle calls runs during the load. Here the converter's input sits in a scratch
# folder, filled in this run with a tampered file whose extra entry unpickles to a call of
# Python's open(): loading it creates (or truncates) a file of the attacker's choosing. Python 3
# pickles open as io.open. Fixed twin: weights_only=True, which refuses the call.
import pickle
import tempfile
from pathlib import Path

import torch
from torch import nn


class _Dropper:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "a"))


def convert(src: Path, dst: Path) -> bool:
    try:
        raw = torch.load(src, map_location="cpu", weights_only=False)  # expect: TG701
    except pickle.UnpicklingError as err:
        print("refused:", str(err).splitlines()[0])
        return False
    renamed = {k.replace("enc.", "encoder."): v for k, v in raw["weights"].items()}
    torch.save(renamed, dst)
    return True


with tempfile.TemporaryDirectory() as scratch:
    root = Path(scratch)
    codec = nn.Sequential(nn.Conv1d(1, 4, 5), nn.GELU(), nn.Conv1d(4, 1, 5))
    weights = {f"enc.{k}": v for k, v in codec.state_dict().items()}
    src = root / "codec_upstream.pt"
    torch.save({"weights": weights, "note": _Dropper(str(root / "dropped.txt"))}, src)
    ok = convert(src, root / "codec_converted.pt")
    print("converted" if ok else "not converted", (root / "dropped.txt").exists())
