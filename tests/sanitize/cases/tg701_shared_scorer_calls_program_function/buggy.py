# Modelled on vinnylarouge/jevlike#3 (https://github.com/vinnylarouge/jevlike/issues/3): the
# library's load_checkpoint reads any scorer checkpoint with torch.load(weights_only=False), and
# people share trained scorers. A shared file's __reduce__ can call any function the loading
# program has, not just os.system: here it calls one of this program's own functions, which
# runs at load. The shared copy is made by shutil.copy of a tampered save, so the loaded path was
# never torch.saved by this process. Loading the program's own save stays silent.
import pickle
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

HOOKS = []


def _register_hook(name):
    HOOKS.append(name)
    return {"vocab": 32}


class _SharedConfig:
    def __reduce__(self):
        return (_register_hook, ("installed by a shared file",))


class PairScorer(nn.Module):
    def __init__(self, vocab=32):
        super().__init__()
        self.encode = nn.EmbeddingBag(vocab, 16)
        self.head = nn.Linear(32, 1)

    def forward(self, left, right):
        return self.head(torch.cat([self.encode(left), self.encode(right)], 1)).squeeze(1)

    def save(self, path, config):
        torch.save({"weights": self.state_dict(), "config": config}, path)

    @classmethod
    def load_checkpoint(cls, path):
        try:
            blob = torch.load(path, map_location="cpu", weights_only=False)  # expect: TG701
        except pickle.UnpicklingError:
            return None
        scorer = cls()
        scorer.load_state_dict(blob["weights"])
        return scorer


torch.manual_seed(0)
scorer = PairScorer()
optimizer = torch.optim.SGD(scorer.parameters(), lr=0.1)
for step in range(5):
    left, right = torch.randint(0, 32, (8, 6)), torch.randint(0, 32, (8, 6))
    loss = nn.functional.binary_cross_entropy_with_logits(
        scorer(left, right), (left.sum(1) > right.sum(1)).float())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

with tempfile.TemporaryDirectory() as tmp:
    own = Path(tmp) / "scorer.pt"
    scorer.save(own, {"vocab": 32})
    PairScorer.load_checkpoint(own)
    upload = Path(tmp) / "upload.pt"
    scorer.save(upload, _SharedConfig())
    shared = Path(tmp) / "shared" / "community-scorer.pt"
    shared.parent.mkdir()
    shutil.copy(upload, shared)
    PairScorer.load_checkpoint(shared)
print("hooks run at load:", HOOKS)
