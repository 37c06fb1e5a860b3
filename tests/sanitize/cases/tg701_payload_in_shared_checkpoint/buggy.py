# Modelled on ecmwf/anemoi-core#1416 (https://github.com/ecmwf/anemoi-core/issues/1416): a
# checkpoint migrator loads files from a user-supplied path with torch.load(...,
# weights_only=False), so a checkpoint whose pickle carries a __reduce__ payload runs it at load.
# Here the shared store is a temporary folder and the "download" into it is simulated in this
# run by a torch.save of a tampered state: the file was written by this process, yet its pickle
# calls exec. Fixed twin: weights_only=True, which refuses the payload.
import pickle
import tempfile
from pathlib import Path

import torch
from torch import nn


class _Tampered:
    def __reduce__(self):
        return (exec, ("pass",))


def fetch_shared(store: Path) -> Path:
    path = store / "graph-forecaster.ckpt"
    state = {"state_dict": nn.Linear(6, 6).state_dict(), "metadata": _Tampered()}
    torch.save(state, path)
    return path


class Migrator:
    def __init__(self, model):
        self.model = model

    def load(self, path):
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=False)  # expect: TG701
        except pickle.UnpicklingError as err:
            print("refused:", str(err).splitlines()[0])
            return False
        self.model.load_state_dict(checkpoint["state_dict"])
        return True


torch.manual_seed(0)
forecaster = nn.Linear(6, 6)
optimizer = torch.optim.Adam(forecaster.parameters(), lr=1e-3)
with tempfile.TemporaryDirectory() as store:
    Migrator(forecaster).load(fetch_shared(Path(store)))
for step in range(3):
    state = torch.randn(8, 6)
    loss = (forecaster(state) - state.roll(1, 0)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
